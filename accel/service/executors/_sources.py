"""Where the ``local`` and ``slurm`` executors read their hosts' devices from.

- ``local``: :func:`inventory_source` — ``None`` (or ``"discover"``) is this host through accel's
  discovery; ``"sim:<profile>"`` a simulator profile (a laptop, a test); a path to a ``.json``
  file an inventory as ``accel ls --json`` wrote it (a replay of a real host).
- ``slurm``: :func:`node_inventory_source` — ``"sim:<profile>"`` gives every node that profile's
  devices; a directory holds ``<node>.json`` per node, each what ``accel ls --json`` printed on that
  node (written by the node itself, e.g. from its health check or a timer).

Bad input (an unknown profile, a missing or invalid file, a node name that is not a plain file
name) is a :class:`~accel.errors.ConfigError` naming it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import pydantic

from accel.errors import ConfigError
from accel.model import HostInventory, Telemetry

__all__ = [
    "ExecutorContextLike",
    "HostSource",
    "inventory_source",
    "node_inventory_source",
    "option_bool",
    "option_str",
    "state_dir",
]

_NODE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class HostSource:
    """One host's devices: its inventory now (:meth:`inventory`) and readings of some of them
    (:meth:`telemetry`; none where the source has no live devices, such as a file)."""

    def __init__(
        self,
        inventory: Callable[[], HostInventory],
        telemetry: Callable[[Sequence[str]], Sequence[Telemetry]] | None = None,
    ) -> None:
        self._inventory = inventory
        self._telemetry = telemetry

    def inventory(self) -> HostInventory:
        return self._inventory()

    def telemetry(self, ids: Sequence[str]) -> tuple[Telemetry, ...]:
        return tuple(self._telemetry(ids)) if self._telemetry is not None else ()


def _session_source(configs: dict[str, Any] | None, backends: list[str] | None) -> HostSource:
    from accel.discovery import open_session

    session: list[Any] = []

    def opened() -> Any:
        if not session:  # one session, kept open: discovery is not repeated per read
            session.append(open_session(configs, backends=backends))
        return session[0]

    def inventory() -> HostInventory:
        inv: HostInventory = opened().inventory()
        return inv

    def telemetry(ids: Sequence[str]) -> Sequence[Telemetry]:
        got: Sequence[Telemetry] = opened().telemetry(list(ids))
        return got

    return HostSource(inventory, telemetry)


def _sim(profile: str) -> HostSource:
    from accel.plugin import BackendConfig
    from accel.sim import list_profiles

    if not profile or (profile not in list_profiles() and not profile.endswith(".json")):
        raise ConfigError(f"unknown simulator profile {profile!r}; known: {', '.join(list_profiles())}")
    return _session_source({"sim": BackendConfig(options={"profile": profile})}, ["sim"])


def _read_file(path: Path) -> HostInventory:
    try:
        return HostInventory.model_validate_json(path.read_bytes())
    except OSError as exc:
        raise ConfigError(f"inventory file {str(path)!r} cannot be read: {exc.strerror}") from exc
    except pydantic.ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        loc = ".".join(str(p) for p in first.get("loc", ()))
        raise ConfigError(f"inventory file {str(path)!r} is not an accel inventory: {loc}: {first.get('msg')}") from exc


def inventory_source(source: str | None) -> HostSource:
    """This host's devices, read anew on every call (see the module docstring)."""
    if source is None or source == "discover":
        return _session_source(None, None)
    if source.startswith("sim:"):
        return _sim(source[len("sim:") :])
    path = Path(source)
    if path.suffix != ".json":
        raise ConfigError(f"inventory source {source!r}: give 'discover', 'sim:<profile>' or an inventory .json file")
    return HostSource(lambda: _read_file(path))


def node_inventory_source(source: str) -> Callable[[str], HostInventory]:
    """A Slurm node's inventory by node name (see the module docstring)."""
    if source.startswith("sim:"):
        sim = _sim(source[len("sim:") :])
        return lambda _node: sim.inventory()
    folder = Path(source)
    if not folder.is_dir():
        raise ConfigError(f"node inventory source {source!r}: give 'sim:<profile>' or a directory of <node>.json")

    def by_node(node: str) -> HostInventory:
        if not _NODE.match(node):
            raise ConfigError(f"Slurm node name {node!r} is not a plain file name")
        return _read_file(folder / f"{node}.json")

    return by_node


class ExecutorContextLike(Protocol):
    """What an executor factory reads of the service's ``ExecutorContext``."""

    @property
    def log_root(self) -> Path: ...

    @property
    def options(self) -> Mapping[str, object]: ...


def wall_to_clock(context: ExecutorContextLike) -> Callable[[float], float] | None:
    """The context's Unix-time-to-service-clock map (``ExecutorContext.wall_to_clock``), if any."""
    fn = getattr(context, "wall_to_clock", None)
    return fn if callable(fn) else None


def option_str(context: ExecutorContextLike, executor: str, key: str) -> str | None:
    """Option ``key`` as a string (``None`` when not given); another type is a ConfigError."""
    value = context.options.get(key)
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, Path):
        return str(value)
    raise ConfigError(f"executor {executor}: option {key} must be a string, got {value!r}")


def option_bool(context: ExecutorContextLike, executor: str, key: str) -> bool:
    """Option ``key`` as a boolean (absent: ``False``)."""
    value = context.options.get(key, False)
    if not isinstance(value, bool):
        raise ConfigError(f"executor {executor}: option {key} must be true or false, got {value!r}")
    return value


def state_dir(context: ExecutorContextLike, executor: str) -> Path:
    """The executor's own state directory: option ``state_dir``, else ``executor-<name>`` beside
    the service's log root (inside the service's state directory)."""
    given = option_str(context, executor, "state_dir")
    return Path(given) if given else context.log_root.parent / f"executor-{executor}"
