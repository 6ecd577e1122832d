"""Discovery: load, version-check and probe every backend, each stage under a deadline."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..errors import AccelError, ConfigError, IncompatiblePluginError, PluginLoadError
from ..plugin import (
    SUPPORTED_API_VERSIONS,
    BackendConfig,
    BackendPlugin,
    PluginInfo,
    ProbeResult,
    ProbeStatus,
    negotiate,
    registered,
)
from ._deadline import _call_with_deadline, _describe, _Outcome, _seconds, call_deadline
from ._loading import _load_entry_points
from ._report import (
    CODE_INVALID_RETURN,
    CODE_TIMEOUT,
    ENV_SELECTION,
    BackendEntry,
    DiscoveryReport,
    EntryStatus,
    Selection,
    Stage,
    parse_selection,
)


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
