"""Conformance rows of section ``errors`` (Errors): Only accel.errors types leave a public method."""

from __future__ import annotations

from collections.abc import Callable

from accel.errors import DeviceError
from accel.plugin import BackendConfig, SupportsEvents, SupportsPartitions, SupportsProcesses

from .._requirements import row
from ._base import SuiteBase
from ._harness import _Harness
from ._helpers import _check, _describe, _is_clean_error

__all__ = ["ErrorsRows"]


class ErrorsRows(SuiteBase):
    """The ``errors.*`` rows of requirements.json."""

    @row("errors.unknown-id")
    def test_errors_unknown_id(self, accel: _Harness) -> None:
        bogus = "accel-conformance:no-such-device"
        problems = []
        for name, fn in (("telemetry", accel.backend.telemetry), ("health", accel.backend.health)):
            try:
                fn([bogus])
            except DeviceError as exc:
                if not exc.code:
                    problems.append(f"{name}([{bogus!r}]) raised {type(exc).__name__} without a code")
            except Exception as exc:  # noqa: BLE001
                problems.append(f"{name}([{bogus!r}]) raised {_describe(exc)}, not accel.errors.DeviceError")
            else:
                problems.append(f"{name}([{bogus!r}]) returned instead of raising DeviceError")
        _check(problems, "check requested ids against the inventory and raise DeviceError(device_id=...)")

    @row("errors.no-vendor-exception")
    def test_errors_no_vendor_exception(self, accel: _Harness) -> None:
        plugin = accel.require_plugin()
        backend = accel.open()
        problems: list[str] = []

        def attempt(what: str, fn: Callable[[], object]) -> None:
            try:
                fn()
            except Exception as exc:  # noqa: BLE001
                if not _is_clean_error(exc):
                    problems.append(f"{what} raised {_describe(exc)}")

        bad_ids: list[list[str]] = [[""], ["accel-conformance:no-such-device"], ["0"], ["x" * 300]]
        for ids in bad_ids:
            attempt(f"telemetry({ids!r:.40})", lambda ids=ids: backend.telemetry(ids))  # type: ignore[misc]
            attempt(f"health({ids!r:.40})", lambda ids=ids: backend.health(ids))  # type: ignore[misc]
            if isinstance(backend, SupportsProcesses):
                attempt(f"processes({ids!r:.40})", lambda ids=ids: backend.processes(ids))  # type: ignore[misc]
        if isinstance(backend, SupportsEvents):
            attempt("poll_events(timeout_s=0)", lambda: backend.poll_events(0.0))
        if isinstance(backend, SupportsPartitions):
            attempt("partitions()", backend.partitions)
            attempt("partition_profiles()", backend.partition_profiles)
        odd = BackendConfig(options={**accel.config.options, "accel-conformance-unknown-option": object()},
                            sysfs_root=accel.config.sysfs_root, dev_root=accel.config.dev_root,
                            runner=accel.config.runner)
        attempt("probe(config with an unknown option)", lambda: plugin.probe(odd))

        def open_odd() -> None:
            plugin.open(odd).close()

        attempt("open(config with an unknown option)", open_odd)
        attempt("close()", backend.close)
        attempt("inventory() after close()", backend.inventory)
        attempt("telemetry() after close()", backend.telemetry)
        attempt("health() after close()", backend.health)
        _check(problems, "map every vendor exception to accel.errors at the plugin's boundary module "
                         "(raise AccelError subclasses, keep the cause with 'from exc')")
