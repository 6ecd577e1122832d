"""Find, probe and open backends; merge several vendors into one session.

    >>> report = accel.discover()                 # doctest: +SKIP
    >>> for entry in report.entries: print(entry.name, entry.status, entry.reason)
    >>> with accel.open_session() as session:     # every present backend
    ...     inv = session.inventory()             # one HostInventory, all vendors

Backends come from the ``accel.backends`` entry points (read with :mod:`importlib.metadata`,
nothing imported until a backend is considered) and from :func:`accel.plugin.register`.  Every
failure (an import that raises anything or hangs, a probe that raises or hangs, an incompatible
plugin API, a name declared by two distributions, an open or read that fails, hangs or returns
the wrong type) becomes an entry of the :class:`DiscoveryReport`; it never stops the other
backends.  Every call into plugin code runs under a deadline in a worker thread
(``_call_with_deadline``); what that costs and cannot do is in ``docs/isolation.md``.
"""

from __future__ import annotations

import contextvars
import functools
import math
import os
import queue
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from types import TracebackType
from typing import Any, Generic, Self, TypeVar

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
    PluginInfo,
    ProbeResult,
    ProbeStatus,
    negotiate,
    registered,
)
from .sysfs import enrich_inventory, numa_nodes

__all__ = [
    "CODE_DUPLICATE",
    "CODE_INVALID_RETURN",
    "CODE_TIMEOUT",
    "OWN_DISTRIBUTION",
    "BackendEntry",
    "DiscoveryReport",
    "EntryStatus",
    "Session",
    "Stage",
    "call_deadline",
    "discover",
    "open_session",
    "parse_selection",
    "refresh",
]

ENV_SELECTION = "ACCEL_BACKENDS"


# --- Isolation: one call into plugin code under a deadline, in a daemon worker thread. ---------
#
# Discovery and Session call into plugins (import, factory, probe, open, every read, close) only
# through _call_with_deadline.  The call runs in a fresh daemon thread; the caller waits at most
# the deadline and gets an _Outcome: the value, the exception (any BaseException: SystemExit and
# KeyboardInterrupt raised by plugin code included; a real Ctrl-C is delivered to the main thread,
# never to a worker, so one seen in a worker was raised by the plugin), or timed_out.  Python
# cannot cancel a thread: a call past its deadline keeps its thread (and what it holds) until it
# returns by itself or the process exits, and the caller never calls that plugin object again; a
# late value is dropped.  A plugin calling os._exit or crashing the interpreter cannot be stopped.
#
# A Session's reads run on one _Worker per backend instead: a daemon thread kept between calls
# (a fresh thread per read costs about a quarter of a millisecond of CPU: its stack and frames
# are new memory each time, which an exporter scraping eight GPUs pays twice a scrape).  Same
# rules: each call its own deadline; a call that passes it leaves the worker stuck with it (the
# session never calls that backend again); a call made while the worker is busy (another thread
# reading the same session) gets a fresh thread, as before, so no call waits behind another.

T = TypeVar("T")


@dataclass(frozen=True)
class _Outcome(Generic[T]):
    """The result of one call under a deadline: exactly one of the three is set."""

    value: T | None = None
    error: BaseException | None = None
    timed_out: bool = False
    elapsed_s: float = 0.0
    #: What the step's check found wrong with ``value`` (:func:`_call_chain` only).
    problem: str | None = None


class _Worker:
    """A daemon thread that runs one backend's calls, one at a time (see the comment above).

    It starts on the first call and ends after ``idle_s`` without one (a session nobody closes
    keeps no thread), or at :meth:`stop`.
    """

    def __init__(self, name: str, idle_s: float = 60.0) -> None:
        self.name = name
        self._idle_s = idle_s
        self._reset()

    def _reset(self) -> None:
        self._pid = os.getpid()
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._busy = False
        self._stuck = False
        self._thread: threading.Thread | None = None

    def acquire(self) -> bool:
        """Reserve the worker for one call; False when it is busy, stuck or stopped."""
        if self._pid != os.getpid():
            # A forked child has none of the parent's threads: start afresh (a stuck parent
            # worker is the parent's; the child's session decides about its own backends).
            self._reset()
        with self._lock:
            if self._busy or self._stuck:
                return False
            self._busy = True
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
                self._thread.start()
            return True

    def release(self) -> None:
        with self._lock:
            self._busy = False

    def submit(self, job: Callable[[], None]) -> None:
        """Run ``job`` (after :meth:`acquire`); it must call :meth:`release` when it ends."""
        self._jobs.put(job)

    def abandon(self) -> None:
        """The call in flight passed its deadline: never use this worker again."""
        with self._lock:
            self._stuck = True
        self._jobs.put(None)

    stop = abandon

    def _loop(self) -> None:
        while True:
            try:
                job = self._jobs.get(timeout=self._idle_s)
            except queue.Empty:
                with self._lock:
                    if self._busy:
                        continue  # reserved just now: its job is on its way
                    self._thread = None
                    return
            if job is None:
                return
            job()


def _call_with_deadline(
    fn: Callable[[], T], deadline_s: float, *, name: str = "accel-plugin-call", worker: _Worker | None = None
) -> _Outcome[T]:
    """Call ``fn()`` in a daemon thread and wait at most ``deadline_s`` seconds for it.

    Never raises for what ``fn`` does; a ``KeyboardInterrupt`` of the *caller's* thread (the
    user pressing Ctrl-C while it waits) propagates as usual.  ``fn`` runs in a copy of the
    caller's :mod:`contextvars` context.  With a ``worker`` that is free, the call runs on it
    instead of a fresh thread.
    """
    box: dict[str, object] = {}
    done = threading.Event()
    ctx = contextvars.copy_context()
    on_worker = worker is not None and worker.acquire()

    def target() -> None:
        try:
            box["value"] = ctx.run(fn)
        except BaseException as exc:  # noqa: BLE001 - plugin code must never take the caller down
            box["error"] = exc
        finally:
            if on_worker:
                assert worker is not None
                worker.release()  # before done: the caller's next call finds the worker free
            done.set()

    start = time.monotonic()
    _launch(target, worker if on_worker else None, name)
    finished = done.wait(deadline_s if math.isfinite(deadline_s) else None)
    elapsed = time.monotonic() - start
    if not finished:
        if on_worker:
            assert worker is not None
            worker.abandon()
        return _Outcome(timed_out=True, elapsed_s=elapsed)
    if "error" in box:
        err = box["error"]
        assert isinstance(err, BaseException)
        return _Outcome(error=err, elapsed_s=elapsed)
    return _Outcome(value=box.get("value"), elapsed_s=elapsed)  # type: ignore[arg-type]


def _launch(target: Callable[[], None], worker: _Worker | None, name: str) -> None:
    """Run ``target`` on ``worker`` (acquired by the caller), or on a fresh daemon thread."""
    if worker is not None:
        worker.submit(target)
    else:
        threading.Thread(target=target, name=name, daemon=True).start()


def _call_chain(
    steps: Sequence[tuple[Callable[[], Any], _Check | None]],
    deadline_s: float,
    *,
    name: str = "accel-plugin-call",
    worker: _Worker | None = None,
) -> list[_Outcome[Any]]:
    """Call each of ``steps`` (a function and the check of its value) one after the other in one
    hand-off (``worker`` when it is free, else a fresh thread), each under its own ``deadline_s``
    counted from its own start, as :func:`_call_with_deadline` would one by one.

    Stops at the first step that raises, returns a value its check refuses, or passes its
    deadline: the steps after it are never called, not even if the late step returns later.
    Returns the outcomes of the steps that ran (the last one says why it stopped, if it did).
    """
    n = len(steps)
    boxes: list[dict[str, Any]] = [{} for _ in range(n)]
    done = [threading.Event() for _ in range(n)]
    given_up = threading.Event()
    ctx = contextvars.copy_context()
    on_worker = worker is not None and worker.acquire()

    def target() -> None:
        for i, (fn, check) in enumerate(steps):
            box = boxes[i]
            try:
                box["value"] = ctx.run(fn)
                box["problem"] = check(box["value"]) if check is not None else None
            except BaseException as exc:  # noqa: BLE001 - plugin code must never take the caller down
                box["error"] = exc
            box["ended"] = time.monotonic()
            last = i == n - 1 or "error" in box or box.get("problem") is not None or given_up.is_set()
            if last and on_worker:
                assert worker is not None
                worker.release()  # before the last done: the caller's next call finds the worker free
            done[i].set()
            if last:
                return

    start = time.monotonic()
    _launch(target, worker if on_worker else None, name)
    out: list[_Outcome[Any]] = []
    for i in range(n):
        began = start if i == 0 else boxes[i - 1]["ended"]
        wait = deadline_s - (time.monotonic() - began) if math.isfinite(deadline_s) else None
        if not done[i].wait(max(wait, 0.0) if wait is not None else None):
            given_up.set()
            if on_worker:
                assert worker is not None
                worker.abandon()
            out.append(_Outcome(timed_out=True, elapsed_s=time.monotonic() - began))
            return out
        box = boxes[i]
        outcome: _Outcome[Any] = _Outcome(value=box.get("value"), error=box.get("error"),
                                          problem=box.get("problem"), elapsed_s=box["ended"] - began)
        out.append(outcome)
        if outcome.error is not None or outcome.problem is not None:
            return out
    return out


def _describe(exc: BaseException) -> str:
    """``TypeName: message`` on one line (``SystemExit: 3``, ``KeyboardInterrupt``)."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


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


#: The distribution accel itself ships in: its backends win a name clash (see ``docs/isolation.md``).
OWN_DISTRIBUTION = "accel-sdk"

#: Error codes of the isolation layer (on :class:`~accel.errors.PluginError` subclasses).
CODE_TIMEOUT = "plugin.timeout"
CODE_INVALID_RETURN = "plugin.invalid-return"
CODE_DUPLICATE = "plugin.duplicate-name"


def call_deadline(config: BackendConfig) -> float:
    """Seconds one call into a plugin may take (import, open, each read, close).

    ``config.call_timeout_s`` when set, else ``2 * tool_timeout_s + 1``: a read may run a
    vendor tool up to its own timeout and parse it; the probe keeps ``probe_timeout_s``.
    """
    if config.call_timeout_s is not None:
        return _seconds(config.call_timeout_s, "call_timeout_s")
    return 2.0 * _seconds(config.tool_timeout_s, "tool_timeout_s") + 1.0


def _seconds(value: float, what: str) -> float:
    """A positive number of seconds (``inf``: no deadline) or a :class:`ConfigError`."""
    seconds = float(value)
    if math.isnan(seconds) or seconds <= 0:
        raise ConfigError(f"BackendConfig.{what} must be a positive number of seconds, got {value!r}")
    return seconds


def refresh() -> None:
    """Forget cached entry points so a plugin installed while the process runs is seen."""
    import importlib
    import sys

    importlib.invalidate_caches()  # importlib.metadata's path cache included
    stevedore = sys.modules.get("stevedore")
    cache = getattr(getattr(stevedore, "ExtensionManager", None), "ENTRY_POINT_CACHE", None)
    if isinstance(cache, dict):
        cache.clear()


def _dist_label(ep: Any) -> str:
    """``name version`` of the distribution that declares ``ep`` (``?`` when unknown)."""
    dist = getattr(ep, "dist", None)
    if dist is None:
        return "an unknown distribution"
    try:
        name = dist.metadata["Name"] or "?"
        return f"{name} {dist.version}"
    except Exception:  # noqa: BLE001 - broken metadata is still a distribution we can name
        return "a distribution with unreadable metadata"


def _is_own(ep: Any) -> bool:
    dist = getattr(ep, "dist", None)
    try:
        name = str(dist.metadata["Name"] or "") if dist is not None else ""
    except Exception:  # noqa: BLE001
        return False
    return name.replace("_", "-").lower() == OWN_DISTRIBUTION


def _entry_points_by_name() -> dict[str, list[Any]]:
    """Every ``accel.backends`` entry point, grouped by name (same name and value: once)."""
    from importlib.metadata import entry_points

    out: dict[str, list[Any]] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        same = out.setdefault(ep.name, [])
        if all(other.value != ep.value for other in same):
            same.append(ep)
    return out


def _load_entry_points(report: DiscoveryReport, selection: Selection) -> dict[str, Callable[[], object]]:
    """Read the group's metadata; nothing is imported here (the loaders import, under a deadline).

    A denied name is a ``disabled`` entry and is never imported.  A name declared by several
    distributions: the one of accel's own distribution wins and each other becomes a
    ``rejected`` entry ``NAME@DIST``; without one of accel's, none is loaded and the name is a
    ``failed`` entry naming every distribution.
    """
    refresh()
    loaders: dict[str, Callable[[], object]] = {}
    for name, eps in sorted(_entry_points_by_name().items()):
        if not selection.permits(name):
            report._set(BackendEntry(name, EntryStatus.DISABLED, f"excluded by {ENV_SELECTION}"))
            continue
        chosen = eps[0]
        if len(eps) > 1:
            listed = "; ".join(f"{_dist_label(ep)} ({ep.value})" for ep in eps)
            own = [ep for ep in eps if _is_own(ep)]
            if len(own) != 1:
                dup = PluginLoadError(
                    f"backend {name!r} is registered by {len(eps)} distributions: {listed}; none of them is "
                    "loaded: uninstall all but one",
                    plugin=name,
                    code=CODE_DUPLICATE,
                )
                report._set(BackendEntry(name, EntryStatus.FAILED, dup.message, Stage.LOAD, error=dup))
                continue
            chosen = own[0]
            for ep in eps:
                if ep is chosen:
                    continue
                label = _dist_label(ep)
                shadow = PluginLoadError(
                    f"backend {name!r} is also registered by {label} ({ep.value}); accel's own "
                    f"{_dist_label(chosen)} ({chosen.value}) is used and this one is ignored",
                    plugin=name,
                    code=CODE_DUPLICATE,
                )
                key = f"{name}@{label.split(' ')[0]}"
                report._set(BackendEntry(key, EntryStatus.REJECTED, shadow.message, Stage.LOAD, error=shadow))
        loaders[name] = chosen.load
    return loaders


def _probe_with_timeout(
    plugin: BackendPlugin, config: BackendConfig, name: str | None = None
) -> tuple[ProbeResult, AccelError | None]:
    """Run ``probe`` under ``probe_timeout_s``; a probe that hangs, raises or returns junk is an
    error.  The typed error of a failed probe comes too: the accel error it raised, or a
    :class:`ConfigError` for a result marked ``bad_config`` (the CLI exits 2 for those)."""
    label = name or str(getattr(getattr(plugin, "info", None), "name", "?"))
    limit = _seconds(config.probe_timeout_s, "probe_timeout_s")
    out = _call_with_deadline(lambda: plugin.probe(config), limit, name=f"accel-probe-{label}")
    if out.timed_out:
        return ProbeResult.error(f"probe timed out after {config.probe_timeout_s:g} s"), None
    if out.error is not None:
        typed = out.error if isinstance(out.error, AccelError) else None
        return ProbeResult.error(f"probe raised {_describe(out.error)}"), typed
    if not isinstance(out.value, ProbeResult):
        return ProbeResult.error(f"probe returned {type(out.value).__name__}, not ProbeResult"), None
    result = out.value
    if result.status is ProbeStatus.ERROR and result.bad_config:
        return result, ConfigError(f"backend {label!r}: {result.reason}")
    return result, None


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

    Every plugin stage runs under a deadline (see :func:`call_deadline` and
    ``docs/isolation.md``): an import that hangs or raises anything (``SystemExit`` included),
    a factory or probe that does, or a plugin object of the wrong type is an entry of the
    report, never an exception of this call.
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
        # An in-process registration deliberately overrides an entry point of the same name.
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


def _load_failure(
    report: DiscoveryReport, name: str, origin: str, what: str, out: _Outcome[Any], deadline: float
) -> bool:
    """Record a failed load step (``what``: importing / creating); ``True`` when it failed."""
    if out.timed_out:
        err = PluginLoadError(
            f"{what} backend {name!r} did not finish within {deadline:g} s (abandoned; it may still hold its "
            "import lock)",
            plugin=name,
            code=CODE_TIMEOUT,
        )
    elif out.error is not None:
        err = PluginLoadError(f"{what} backend {name!r} failed: {_describe(out.error)}", plugin=name)
        err.__cause__ = out.error
    else:
        return False
    report._set(BackendEntry(name, EntryStatus.FAILED, err.message, Stage.LOAD, origin, error=err))
    return True


def _consider(
    report: DiscoveryReport,
    name: str,
    origin: str,
    loader: Callable[[], object],
    config: BackendConfig,
) -> None:
    deadline = call_deadline(config)
    what = "importing" if origin == "entry-point" else "creating"
    loaded = _call_with_deadline(loader, deadline, name=f"accel-load-{name}")
    if _load_failure(report, name, origin, what, loaded, deadline):
        return
    obj = loaded.value

    def construct() -> tuple[object, object, object]:
        plugin = obj() if isinstance(obj, type) else obj
        info = getattr(plugin, "info", None)
        return plugin, info, getattr(info, "api_versions", None)

    built = _call_with_deadline(construct, deadline, name=f"accel-create-{name}")
    if _load_failure(report, name, origin, "creating", built, deadline):
        return
    assert built.value is not None
    plugin, info, offered = built.value
    if not isinstance(plugin, BackendPlugin):
        what = type(plugin).__name__
        bad = PluginLoadError(f"backend {name!r} is a {what}, not a BackendPlugin", plugin=name)
        report._set(BackendEntry(name, EntryStatus.REJECTED, bad.message, Stage.LOAD, origin, error=bad))
        return
    if info is not None and not isinstance(info, PluginInfo):
        bad = PluginLoadError(
            f"backend {name!r}: info is a {type(info).__name__}, not a PluginInfo",
            plugin=name,
            code=CODE_INVALID_RETURN,
        )
        report._set(BackendEntry(name, EntryStatus.REJECTED, bad.message, Stage.LOAD, origin, error=bad))
        return
    chosen = negotiate(offered) if isinstance(info, PluginInfo) and offered else None  # type: ignore[arg-type]
    if not isinstance(info, PluginInfo) or chosen is None:
        supported = ", ".join(str(v) for v in sorted(SUPPORTED_API_VERSIONS))
        versions = info.api_versions if isinstance(info, PluginInfo) else frozenset()
        got = ", ".join(str(v) for v in sorted(versions)) or "none"
        inc = IncompatiblePluginError(
            f"backend {name!r} speaks plugin API {got}; this accel supports {supported}", plugin=name
        )
        report._set(BackendEntry(name, EntryStatus.REJECTED, inc.message, Stage.LOAD, origin, error=inc))
        return
    result, error = _probe_with_timeout(plugin, config, name)
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
            error=error,
        )
    )
    if status is EntryStatus.PRESENT:
        report.plugins[name] = plugin


#: Says what is wrong with a value a plugin returned (``None``: nothing).
_Check = Callable[[object], "str | None"]


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
