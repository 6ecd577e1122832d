"""Find, probe and open backends; merge several vendors into one session.

    >>> report = accel.discover()                 # doctest: +SKIP
    >>> for entry in report.entries: print(entry.name, entry.status, entry.reason)
    >>> with accel.open_session() as session:     # every present backend
    ...     inv = session.inventory()             # one HostInventory, all vendors

Backends come from the ``accel.backends`` entry points (loaded with stevedore, nothing
constructed at load) and from :func:`accel.plugin.register`.  Every failure (an import that
raises, a probe that raises or hangs, an incompatible plugin API, an open that fails) becomes
an entry of the :class:`DiscoveryReport`; it never stops the other backends.
"""

from __future__ import annotations

import functools
import os
import socket
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from types import TracebackType
from typing import Any, Self

from .errors import (
    AccelError,
    BackendUnavailableError,
    ConfigError,
    IncompatiblePluginError,
    PluginLoadError,
)
from .model import Health, Host, HostInventory, NumaNode, Problem, ProblemKind, SourceInfo, Telemetry, validate
from .plugin import (
    ENTRY_POINT_GROUP,
    SUPPORTED_API_VERSIONS,
    ApiVersion,
    Backend,
    BackendConfig,
    BackendPlugin,
    ProbeResult,
    ProbeStatus,
    negotiate,
    registered,
)
from .sysfs import enrich_inventory

__all__ = [
    "BackendEntry",
    "DiscoveryReport",
    "EntryStatus",
    "Session",
    "Stage",
    "discover",
    "open_session",
    "parse_selection",
    "refresh",
]

ENV_SELECTION = "ACCEL_BACKENDS"


class EntryStatus(StrEnum):
    PRESENT = "present"
    ABSENT = "absent"
    FAILED = "failed"
    REJECTED = "rejected"
    DISABLED = "disabled"
    OPEN = "open"


class Stage(StrEnum):
    LOAD = "load"
    PROBE = "probe"
    OPEN = "open"
    READ = "read"


@dataclass(frozen=True)
class BackendEntry:
    """What discovery learnt about one backend."""

    name: str
    status: EntryStatus
    reason: str = ""
    stage: Stage | None = None
    origin: str = "entry-point"
    plugin_version: str | None = None
    vendor: str | None = None
    api_version: ApiVersion | None = None
    error: AccelError | None = field(default=None, compare=False, repr=False)
    device_count: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status.value,
            "reason": self.reason,
            "stage": self.stage.value if self.stage else None,
            "origin": self.origin,
            "plugin_version": self.plugin_version,
            "vendor": self.vendor,
            "api_version": str(self.api_version) if self.api_version else None,
            "error_code": self.error.code if self.error else None,
            "device_count": self.device_count,
        }


@dataclass
class DiscoveryReport:
    """Every backend seen, with its outcome.  ``plugins`` holds the usable plugin objects."""

    entries: list[BackendEntry] = field(default_factory=list)
    plugins: dict[str, BackendPlugin] = field(default_factory=dict, repr=False)

    def entry(self, name: str) -> BackendEntry:
        for e in self.entries:
            if e.name == name:
                return e
        raise KeyError(name)

    def _set(self, new: BackendEntry) -> None:
        self.entries = [new if e.name == new.name else e for e in self.entries]
        if all(e.name != new.name for e in self.entries):
            self.entries.append(new)

    def by_status(self, status: EntryStatus) -> list[BackendEntry]:
        return [e for e in self.entries if e.status is status]

    @property
    def present(self) -> list[str]:
        return [e.name for e in self.entries if e.status in (EntryStatus.PRESENT, EntryStatus.OPEN)]

    def as_dict(self) -> dict[str, Any]:
        return {"backends": [e.as_dict() for e in self.entries]}


@dataclass(frozen=True)
class Selection:
    """Allow / deny lists: ``nvidia,sim`` allows only those; ``-nvidia`` denies one."""

    allow: frozenset[str] | None = None
    deny: frozenset[str] = frozenset()

    def permits(self, name: str) -> bool:
        if name in self.deny:
            return False
        return self.allow is None or name in self.allow


def parse_selection(text: str | None) -> Selection:
    """Parse ``ACCEL_BACKENDS``: a comma list; names prefixed with ``-`` are denied."""
    if not text or not text.strip():
        return Selection()
    allow: set[str] = set()
    deny: set[str] = set()
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            continue
        if item.startswith("-"):
            deny.add(item[1:].strip())
        else:
            allow.add(item)
    for name in allow | deny:
        if not name or not all(c.isalnum() or c in "-_" for c in name):
            raise ConfigError(f"{ENV_SELECTION}: invalid backend name {name!r}")
    return Selection(frozenset(allow) if allow else None, frozenset(deny))


def refresh() -> None:
    """Forget cached entry points so a plugin installed while the process runs is seen."""
    import stevedore

    cache = getattr(stevedore.ExtensionManager, "ENTRY_POINT_CACHE", None)
    if isinstance(cache, dict):
        cache.clear()


def _load_entry_points(report: DiscoveryReport, selection: Selection) -> dict[str, Callable[[], object]]:
    """Stevedore over the group; failures of import are recorded, nothing is constructed."""
    import stevedore

    # stevedore keeps a class-level cache per namespace; without this a plugin installed (or a
    # dist-info added to sys.path) while the process runs would stay invisible.
    refresh()
    loaders: dict[str, Callable[[], object]] = {}
    failures: list[tuple[str, BaseException]] = []

    def on_failure(_mgr: object, ep: Any, exc: BaseException) -> None:
        failures.append((str(getattr(ep, "name", ep)), exc))

    mgr: stevedore.ExtensionManager[Any]
    if selection.allow is None and not selection.deny:
        mgr = stevedore.ExtensionManager(
            namespace=ENTRY_POINT_GROUP,
            invoke_on_load=False,
            on_load_failure_callback=on_failure,
        )
    else:
        # Only the permitted names are loaded, so a denied plugin is never imported.
        names = _entry_point_names()
        allowed = [n for n in names if selection.permits(n)]
        for n in names:
            if not selection.permits(n):
                report._set(BackendEntry(n, EntryStatus.DISABLED, f"excluded by {ENV_SELECTION}"))
        mgr = stevedore.NamedExtensionManager(
            namespace=ENTRY_POINT_GROUP,
            names=allowed,
            invoke_on_load=False,
            on_load_failure_callback=on_failure,
            name_order=True,
        )
    for ext in mgr.extensions:
        loaders[ext.name] = _constant(ext.plugin)
    for name, exc in failures:
        err = PluginLoadError(f"importing backend {name!r} failed: {type(exc).__name__}: {exc}", plugin=name)
        err.__cause__ = exc
        report._set(BackendEntry(name, EntryStatus.FAILED, err.message, Stage.LOAD, error=err))
    return loaders


def _constant(obj: object) -> Callable[[], object]:
    def factory() -> object:
        return obj

    return factory


def _entry_point_names() -> list[str]:
    from importlib.metadata import entry_points

    return sorted({ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)})


def _probe_with_timeout(plugin: BackendPlugin, config: BackendConfig) -> ProbeResult:
    """Run ``probe`` in a daemon thread; a probe that hangs past the timeout is an error."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = plugin.probe(config)
        except BaseException as exc:  # noqa: BLE001 - a probe must never break discovery
            box["error"] = exc

    thread = threading.Thread(target=target, name=f"accel-probe-{plugin.info.name}", daemon=True)
    thread.start()
    thread.join(config.probe_timeout_s)
    if thread.is_alive():
        return ProbeResult.error(f"probe timed out after {config.probe_timeout_s:g} s")
    if "error" in box:
        exc = box["error"]
        return ProbeResult.error(f"probe raised {type(exc).__name__}: {exc}")
    result = box.get("result")
    if not isinstance(result, ProbeResult):
        return ProbeResult.error(f"probe returned {type(result).__name__}, not ProbeResult")
    return result


def discover(
    configs: Mapping[str, BackendConfig] | None = None,
    *,
    default_config: BackendConfig | None = None,
    backends: Iterable[str] | None = None,
    selection: str | None = None,
    include_entry_points: bool = True,
) -> DiscoveryReport:
    """Load, version-check and probe every backend; never raises for a backend's fault.

    ``backends`` (or ``selection``, in ``ACCEL_BACKENDS`` syntax, default the environment
    variable) limits which are considered; an unknown name in an explicit allow list is a
    :class:`~accel.errors.ConfigError`.  ``configs`` gives per-backend configuration.
    """
    configs = dict(configs or {})
    default = default_config or BackendConfig()
    if backends is not None:
        sel = Selection(allow=frozenset(backends))
    else:
        sel = parse_selection(selection if selection is not None else os.environ.get(ENV_SELECTION))
    report = DiscoveryReport()
    loaders: dict[str, tuple[str, Callable[[], object]]] = {}
    if include_entry_points:
        for name, loader in _load_entry_points(report, sel).items():
            loaders[name] = ("entry-point", loader)
    for name, factory in registered().items():
        if not sel.permits(name):
            why = f"excluded by {ENV_SELECTION}"
            report._set(BackendEntry(name, EntryStatus.DISABLED, why, origin="register"))
            continue
        loaders[name] = ("register", factory)
    if sel.allow is not None:
        known = set(loaders) | {e.name for e in report.entries}
        unknown = sorted(sel.allow - known)
        if unknown:
            names = ", ".join(sorted(known)) or "none"
            raise ConfigError(f"unknown backend {', '.join(map(repr, unknown))}; known backends: {names}")
    for name in sorted(loaders):
        origin, loader = loaders[name]
        _consider(report, name, origin, loader, configs.get(name, default))
    return report


def _consider(
    report: DiscoveryReport,
    name: str,
    origin: str,
    loader: Callable[[], object],
    config: BackendConfig,
) -> None:
    try:
        obj = loader()
        plugin = obj() if isinstance(obj, type) else obj
    except Exception as exc:  # noqa: BLE001 - a broken plugin factory is reported, not raised
        err = PluginLoadError(f"creating backend {name!r} failed: {type(exc).__name__}: {exc}", plugin=name)
        err.__cause__ = exc
        report._set(BackendEntry(name, EntryStatus.FAILED, err.message, Stage.LOAD, origin, error=err))
        return
    if not isinstance(plugin, BackendPlugin):
        what = type(plugin).__name__
        bad = PluginLoadError(f"backend {name!r} is a {what}, not a BackendPlugin", plugin=name)
        report._set(BackendEntry(name, EntryStatus.REJECTED, bad.message, Stage.LOAD, origin, error=bad))
        return
    info = getattr(plugin, "info", None)
    offered = getattr(info, "api_versions", None)
    chosen = negotiate(offered) if offered else None
    if info is None or chosen is None:
        supported = ", ".join(str(v) for v in sorted(SUPPORTED_API_VERSIONS))
        got = ", ".join(str(v) for v in sorted(offered or ())) or "none"
        inc = IncompatiblePluginError(
            f"backend {name!r} speaks plugin API {got}; this accel supports {supported}", plugin=name
        )
        report._set(BackendEntry(name, EntryStatus.REJECTED, inc.message, Stage.LOAD, origin, error=inc))
        return
    result = _probe_with_timeout(plugin, config)
    status = {
        ProbeStatus.PRESENT: EntryStatus.PRESENT,
        ProbeStatus.ABSENT: EntryStatus.ABSENT,
        ProbeStatus.ERROR: EntryStatus.FAILED,
    }[result.status]
    report._set(
        BackendEntry(
            name,
            status,
            result.reason,
            Stage.PROBE if status is EntryStatus.FAILED else None,
            origin,
            plugin_version=info.version,
            vendor=info.vendor,
            api_version=chosen,
            device_count=result.device_count,
        )
    )
    if status is EntryStatus.PRESENT:
        report.plugins[name] = plugin


class Session:
    """Open backends over one host; reads merge every vendor into one view.

    A backend whose read fails is recorded in :attr:`report` (stage ``read``) and the others
    still answer.  Use as a context manager, or call :meth:`close`.
    """

    def __init__(self, report: DiscoveryReport, configs: Mapping[str, BackendConfig], default: BackendConfig) -> None:
        self.report = report
        self._configs = dict(configs)
        self._default = default
        self.backends: dict[str, Backend] = {}
        self._owned: dict[str, set[str]] = {}
        self._closed = False
        for name, plugin in sorted(report.plugins.items()):
            config = self._configs.get(name, default)
            try:
                backend = plugin.open(config)
            except AccelError as exc:
                self._fail(name, Stage.OPEN, exc)
                continue
            except Exception as exc:  # noqa: BLE001 - a plugin bug must not hide other vendors
                err = BackendUnavailableError(
                    f"opening backend {name!r} failed: {type(exc).__name__}: {exc}", plugin=name
                )
                err.__cause__ = exc
                self._fail(name, Stage.OPEN, err)
                continue
            self.backends[name] = backend
            entry = report.entry(name)
            report._set(replace(entry, status=EntryStatus.OPEN))

    def _fail(self, name: str, stage: Stage, exc: AccelError) -> None:
        entry = self.report.entry(name)
        self.report._set(replace(entry, status=EntryStatus.FAILED, reason=str(exc), stage=stage, error=exc))

    def _call(self, name: str, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except AccelError as exc:
            self._fail(name, Stage.READ, exc)
        except Exception as exc:  # noqa: BLE001 - isolate a backend's bug from the others
            why = f"backend {name!r} failed: {type(exc).__name__}: {exc}"
            err = BackendUnavailableError(why, plugin=name)
            err.__cause__ = exc
            self._fail(name, Stage.READ, err)
        return None

    def _ids_for(self, name: str, ids: Sequence[str] | None) -> list[str] | None:
        """The requested ids this backend owns (``None``: all of its devices)."""
        if ids is None:
            return None
        if name not in self._owned:
            inv = self._call(name, self.backends[name].inventory)
            if inv is None:
                return []
            self._note(name, inv)
        owned = self._owned[name]
        return [i for i in ids if i in owned]

    def _note(self, name: str, inv: HostInventory) -> None:
        self._owned[name] = {d.id for d in inv.devices} | {p.id for p in inv.partitions}

    def inventories(self) -> dict[str, HostInventory]:
        """One inventory per backend that answered."""
        out: dict[str, HostInventory] = {}
        for name, backend in self.backends.items():
            inv = self._call(name, backend.inventory)
            if inv is None:
                continue
            config = self._configs.get(name, self._default)
            if config.enrich_from_sysfs:
                inv = enrich_inventory(inv, config.sysfs_root)
            self._note(name, inv)
            out[name] = inv
        return out

    def inventory(self) -> HostInventory:
        """Every backend's inventory merged into one.

        A backend that could not be loaded, probed, opened or read is a
        :attr:`~accel.model.ProblemKind.BACKEND` problem of the result: its devices are missing
        from this picture, and ``inventory.complete`` says so.
        """
        merged = merge_inventories(list(self.inventories().values()))
        return merge_inventories([merged], problems=self.backend_problems())

    def backend_problems(self) -> tuple[Problem, ...]:
        """One :class:`~accel.model.Problem` per backend that failed (any stage)."""
        return tuple(
            Problem(
                kind=ProblemKind.BACKEND,
                backend=e.name,
                message=(e.reason or f"backend {e.name!r} failed at {e.stage or 'an unknown stage'}")[:1000],
                code=e.error.code if e.error is not None else None,
            )
            for e in self.report.entries
            if e.status is EntryStatus.FAILED
        )

    def telemetry(self, ids: Sequence[str] | None = None) -> tuple[Telemetry, ...]:
        samples: list[Telemetry] = []
        for name, backend in self.backends.items():
            wanted = self._ids_for(name, ids)
            if wanted is not None and not wanted:
                continue
            got = self._call(name, functools.partial(backend.telemetry, wanted))
            samples.extend(got or ())
        return tuple(samples)

    def health(self, ids: Sequence[str] | None = None) -> dict[str, Health]:
        """Health per device id across backends; unknown ids are simply absent."""
        out: dict[str, Health] = {}
        for name, backend in self.backends.items():
            wanted = self._ids_for(name, ids)
            if wanted is not None and not wanted:
                continue
            got = self._call(name, functools.partial(backend.health, wanted))
            out.update(got or {})
        return out

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for name, backend in self.backends.items():
            self._call(name, backend.close)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def merge_inventories(inventories: Sequence[HostInventory], *, problems: Sequence[Problem] = ()) -> HostInventory:
    """Merge per-backend inventories of one host; device ids are vendor-qualified, so they compose.

    Every inventory's ``problems`` are kept, followed by ``problems`` (what failed outside
    any one inventory, such as a backend that could not be read).
    """
    now = datetime.now(UTC)
    if not inventories:
        return HostInventory(host=Host(hostname=socket.gethostname()), collected_at=now, problems=tuple(problems))
    if len(inventories) == 1:
        if not problems:
            return inventories[0]
        return validate(
            HostInventory,
            {**dict(inventories[0]), "problems": (*inventories[0].problems, *problems)},
            what="inventory",
        )
    first = inventories[0]
    numa: dict[int, NumaNode] = {}
    sources: list[SourceInfo] = []
    for inv in inventories:
        for node in inv.host.numa_nodes:
            numa.setdefault(node.id, node)
        sources.extend(inv.sources)
    host = first.host.model_copy(update={"numa_nodes": tuple(numa[k] for k in sorted(numa))})
    data = {
        "host": host,
        "devices": [d for inv in inventories for d in inv.devices],
        "partitions": [p for inv in inventories for p in inv.partitions],
        "partition_profiles": [p for inv in inventories for p in inv.partition_profiles],
        "links": [x for inv in inventories for x in inv.links],
        "domains": [x for inv in inventories for x in inv.domains],
        "processes": [x for inv in inventories for x in inv.processes],
        "collected_at": min(inv.collected_at for inv in inventories),
        "sources": sources,
        "problems": [*(x for inv in inventories for x in inv.problems), *problems],
    }
    return validate(HostInventory, data, what="merged inventory")


def open_session(
    configs: Mapping[str, BackendConfig] | None = None,
    *,
    default_config: BackendConfig | None = None,
    backends: Iterable[str] | None = None,
    selection: str | None = None,
    report: DiscoveryReport | None = None,
) -> Session:
    """Discover (unless a ``report`` is given) and open every present backend."""
    configs = dict(configs or {})
    default = default_config or BackendConfig()
    if report is None:
        report = discover(configs, default_config=default, backends=backends, selection=selection)
    return Session(report, configs, default)
