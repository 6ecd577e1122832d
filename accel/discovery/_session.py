"""The :class:`Session`: open backends over one host, read each on its own worker, merge the answers."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from ..errors import AccelError, BackendUnavailableError
from ..model import Health, HostInventory, NumaNode, Problem, ProblemKind, Telemetry, validate
from ..plugin import Backend, BackendConfig
from ..sysfs import enrich_inventory, numa_nodes
from ._deadline import _call_chain, _call_with_deadline, _Check, _describe, _Outcome, _Worker, call_deadline
from ._discover import discover
from ._merge import merge_inventories
from ._report import CODE_INVALID_RETURN, CODE_TIMEOUT, DiscoveryReport, EntryStatus, Stage


def _check_inventory(value: object) -> str | None:
    if not isinstance(value, HostInventory):
        return f"a {type(value).__name__}, not a HostInventory"
    try:  # one level deep: catches a model_construct()-ed inventory with junk fields
        validate(HostInventory, {k: getattr(value, k) for k in HostInventory.model_fields}, what="inventory")
    except (AccelError, AttributeError) as exc:
        return f"an invalid HostInventory: {exc}"
    return None


def _check_telemetry(value: object) -> str | None:
    if not isinstance(value, Sequence) or isinstance(value, (str, bytes)):
        return f"a {type(value).__name__}, not a sequence of Telemetry"
    bad = next((v for v in value if not isinstance(v, Telemetry)), None)
    if bad is not None:
        return f"a {type(value).__name__} holding a {type(bad).__name__}, not only Telemetry"
    return None


def _check_health(value: object) -> str | None:
    if not isinstance(value, Mapping):
        return f"a {type(value).__name__}, not a mapping of device id to Health"
    for key, item in value.items():
        if not isinstance(key, str) or not isinstance(item, Health):
            return f"a mapping with a {type(key).__name__} -> {type(item).__name__} item, not str -> Health"
    return None


def _check_backend(value: object) -> str | None:
    return None if isinstance(value, Backend) else f"a {type(value).__name__}, not a Backend"


class Session:
    """Open backends over one host; reads merge every vendor into one view.

    A backend whose read fails is recorded in :attr:`report` (stage ``read``) and the others
    still answer.  Every call into a backend (``open``, each read, ``close``) runs under
    :func:`call_deadline`; a backend that passes it is ``failed``, leaves :attr:`backends` and
    is never called again (its thread is abandoned, see ``docs/isolation.md``).  Use as a
    context manager, or call :meth:`close`.
    """

    def __init__(self, report: DiscoveryReport, configs: Mapping[str, BackendConfig], default: BackendConfig) -> None:
        self.report = report
        self._configs = dict(configs)
        self._default = default
        self.backends: dict[str, Backend] = {}
        self._owned: dict[str, set[str]] = {}
        self._closed = False
        self._lock = threading.Lock()
        #: Backends that passed a deadline: never called again.
        self._abandoned: set[str] = set()
        #: One worker thread per backend for its reads (see _Worker).
        self._workers: dict[str, _Worker] = {}
        self._numa: dict[Path, tuple[NumaNode, ...]] = {}
        for name, plugin in sorted(report.plugins.items()):
            config = self._configs.get(name, default)
            backend = self._run(name, Stage.OPEN, "open", functools.partial(plugin.open, config), _check_backend)
            if backend is None:
                continue
            self.backends[name] = backend
            entry = report.entry(name)
            report._set(replace(entry, status=EntryStatus.OPEN))

    def _fail(self, name: str, stage: Stage, exc: AccelError) -> None:
        entry = self.report.entry(name)
        self.report._set(replace(entry, status=EntryStatus.FAILED, reason=str(exc), stage=stage, error=exc))

    def _deadline(self, name: str) -> float:
        return call_deadline(self._configs.get(name, self._default))

    def _abandon(self, name: str) -> None:
        with self._lock:
            self._abandoned.add(name)
            self.backends.pop(name, None)

    def _live(self) -> list[tuple[str, Backend]]:
        with self._lock:
            return [(n, b) for n, b in self.backends.items() if n not in self._abandoned]

    def _run(
        self,
        name: str,
        stage: Stage,
        method: str,
        fn: Callable[[], Any],
        check: _Check | None = None,
    ) -> Any:
        """Call ``fn`` (the backend's ``method``) under the deadline; ``None`` when it failed."""
        if name in self._abandoned:
            return None
        deadline = self._deadline(name)
        worker = self._worker(name) if stage is Stage.READ else None
        out = _call_with_deadline(fn, deadline, name=f"accel-{method}-{name}", worker=worker)
        if not out.timed_out and out.error is None and check is not None:
            out = replace(out, problem=check(out.value))
        return out.value if self._settle(name, stage, method, out, deadline) else None

    def _worker(self, name: str) -> _Worker:
        worker = self._workers.get(name)
        if worker is None:
            worker = self._workers.setdefault(name, _Worker(f"accel-read-{name}"))
        return worker

    def _settle(self, name: str, stage: Stage, method: str, out: _Outcome[Any], deadline: float) -> bool:
        """Record what went wrong with one call (``False``), or nothing (``True``: it answered)."""
        if out.timed_out:
            self._abandon(name)
            err: AccelError = BackendUnavailableError(
                f"backend {name!r}: {method}() did not return within {deadline:g} s; accel no longer calls it",
                plugin=name,
                code=CODE_TIMEOUT,
            )
            self._fail(name, stage, err)
            return False
        if isinstance(out.error, AccelError):
            self._fail(name, stage, out.error)
            return False
        if out.error is not None:
            why = f"{'opening backend' if stage is Stage.OPEN else 'backend'} {name!r} failed: {_describe(out.error)}"
            err = BackendUnavailableError(why, plugin=name)
            err.__cause__ = out.error
            self._fail(name, stage, err)
            return False
        if out.problem is not None:
            err = BackendUnavailableError(
                f"backend {name!r}: {method}() returned {out.problem}", plugin=name, code=CODE_INVALID_RETURN
            )
            self._fail(name, stage, err)
            return False
        return True

    def _call(self, name: str, fn: Callable[[], Any], method: str = "read", check: _Check | None = None) -> Any:
        return self._run(name, Stage.READ, method, fn, check)

    def _ids_for(self, name: str, ids: Sequence[str] | None) -> list[str] | None:
        """The requested ids this backend owns (``None``: all of its devices)."""
        if ids is None:
            return None
        if name not in self._owned:
            backend = self.backends.get(name)
            inv = self._call(name, backend.inventory, "inventory", _check_inventory) if backend else None
            if inv is None:
                return []
            self._note(name, inv)
        owned = self._owned[name]
        return [i for i in ids if i in owned]

    def _note(self, name: str, inv: HostInventory) -> None:
        self._owned[name] = {d.id for d in inv.devices} | {p.id for p in inv.partitions}

    def _numa_nodes(self, root: Path) -> tuple[NumaNode, ...]:
        """The host's NUMA nodes under ``root``, read once per session: the node layout is the
        machine's, and an exporter would otherwise read every node's meminfo every scrape."""
        nodes = self._numa.get(root)
        if nodes is None:
            nodes = self._numa[root] = numa_nodes(root)
        return nodes

    def inventories(self) -> dict[str, HostInventory]:
        """One inventory per backend that answered."""
        out: dict[str, HostInventory] = {}
        for name, backend in self._live():
            inv = self._call(name, backend.inventory, "inventory", _check_inventory)
            if inv is None:
                continue
            config = self._configs.get(name, self._default)
            if config.enrich_from_sysfs:
                inv = enrich_inventory(inv, config.sysfs_root, nodes=self._numa_nodes(config.sysfs_root))
            self._note(name, inv)
            out[name] = inv
        return out

    def read_backend(
        self, name: str
    ) -> tuple[HostInventory | None, tuple[Telemetry, ...] | None, str | None]:
        """``inventory()`` then ``telemetry()`` of backend ``name`` in one hand-off to its worker:
        what an exporter reads every scrape, for the price of one thread switch instead of two.

        Each call has its own deadline and its failure is recorded as with :meth:`inventories`
        and :meth:`telemetry`; telemetry is not called when the inventory failed.  Returns the
        inventory (enriched from sysfs as :meth:`inventories` does), the samples, and the name of
        the call that failed (``None``: both answered).  A backend that is not open answers
        ``(None, None, "inventory")``.
        """
        backend = self.backends.get(name)
        if backend is None or name in self._abandoned:
            return None, None, "inventory"
        deadline = self._deadline(name)
        steps: list[tuple[Callable[[], Any], _Check | None]] = [
            (backend.inventory, _check_inventory), (functools.partial(backend.telemetry, None), _check_telemetry)]
        outs = _call_chain(steps, deadline, name=f"accel-read-{name}", worker=self._worker(name))
        if not self._settle(name, Stage.READ, "inventory", outs[0], deadline):
            return None, None, "inventory"
        inv = outs[0].value
        assert isinstance(inv, HostInventory)  # _check_inventory passed
        config = self._configs.get(name, self._default)
        if config.enrich_from_sysfs:
            inv = enrich_inventory(inv, config.sysfs_root, nodes=self._numa_nodes(config.sysfs_root))
        self._note(name, inv)
        if len(outs) < 2 or not self._settle(name, Stage.READ, "telemetry", outs[1], deadline):
            return inv, None, "telemetry"
        samples = outs[1].value
        assert isinstance(samples, Sequence)  # _check_telemetry passed
        return inv, tuple(samples), None

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
        for name, backend in self._live():
            wanted = self._ids_for(name, ids)
            if wanted is not None and not wanted:
                continue
            got = self._call(name, functools.partial(backend.telemetry, wanted), "telemetry", _check_telemetry)
            samples.extend(got or ())
        return tuple(samples)

    def health(self, ids: Sequence[str] | None = None) -> dict[str, Health]:
        """Health per device id across backends; unknown ids are simply absent."""
        out: dict[str, Health] = {}
        for name, backend in self._live():
            wanted = self._ids_for(name, ids)
            if wanted is not None and not wanted:
                continue
            got = self._call(name, functools.partial(backend.health, wanted), "health", _check_health)
            out.update(got or {})
        return out

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for name, backend in self._live():
            self._call(name, backend.close, "close")
        for worker in self._workers.values():
            worker.stop()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


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
