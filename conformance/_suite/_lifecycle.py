"""Conformance rows of section ``lifecycle`` (Lifecycle): open, close and the context manager."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

from accel.plugin import Backend, Capability

from .._hooks import Fault
from .._requirements import row
from ._base import SuiteBase
from ._harness import _Harness
from ._helpers import _check, _describe

__all__ = ["LifecycleRows"]


class LifecycleRows(SuiteBase):
    """The ``lifecycle.*`` rows of requirements.json."""

    @row("lifecycle.close-idempotent")
    def test_lifecycle_close_idempotent(self, accel: _Harness) -> None:
        backend = accel.open()
        accel.call("inventory()", backend.inventory)
        accel.call("close()", backend.close)
        accel.call("a second close()", backend.close)
        again = accel.open()
        accel.call("inventory() after reopening", again.inventory)
        accel.call("close() of the reopened backend", again.close)

    @row("lifecycle.context-manager")
    def test_lifecycle_context_manager(self, accel: _Harness) -> None:
        plugin = accel.require_plugin()
        problems = []
        closes: list[int] = []

        class Boom(Exception):
            pass

        try:
            with plugin.open(accel.config) as backend:
                original = backend.close

                def counted() -> None:
                    closes.append(1)
                    original()

                backend.close = counted  # type: ignore[method-assign]
                accel.call("inventory() inside 'with'", backend.inventory)
                raise Boom
        except Boom:
            pass
        except Exception as exc:  # noqa: BLE001
            problems.append(f"leaving 'with' after an error raised {_describe(exc)} instead of the original error")
        else:
            problems.append("__exit__ swallowed the exception raised inside 'with'")
        if not closes:
            problems.append("__exit__ did not call close()")
        with plugin.open(accel.config) as b2:
            entered = b2
        if not isinstance(entered, Backend):
            problems.append(f"__enter__ returned {type(entered).__name__}, not the backend")
        _check(problems, "inherit Backend.__enter__/__exit__ (return self, call close(), return None)")

    @row("lifecycle.close-after-failure")
    def test_lifecycle_close_after_failure(self, accel: _Harness) -> None:
        problems = []
        backend = accel.open()
        with contextlib.suppress(Exception):
            backend.telemetry(["accel-conformance:no-such-device"])
        try:
            backend.close()
        except Exception as exc:  # noqa: BLE001
            problems.append(f"close() after a failed call raised {_describe(exc)}")
        faulted = accel.faulted(Fault.DEVICE_LOST)
        if faulted is not None:
            other = faulted[0]
            with contextlib.suppress(Exception):
                other.health()  # let the backend notice the loss first
            try:
                other.close()
            except Exception as exc:  # noqa: BLE001
                problems.append(f"close() after a device was lost raised {_describe(exc)}")
        _check(problems, "make close() release what was acquired and ignore what already failed")

    @row("lifecycle.concurrent-reads")
    def test_lifecycle_concurrent_reads(self, accel: _Harness) -> None:
        backend = accel.backend
        info = accel.require_plugin().info
        calls: list[tuple[str, Callable[[], object]]] = [("inventory()", backend.inventory),
                                                         ("health()", backend.health)]
        if info.declares(Capability.TELEMETRY):
            calls.append(("telemetry()", backend.telemetry))
        errors: list[str] = []
        lock = threading.Lock()
        barrier = threading.Barrier(len(calls) * 2)

        def work(name: str, fn: Callable[[], object]) -> None:
            try:
                barrier.wait(timeout=30)
                for _ in range(3):
                    fn()
            except Exception as exc:  # noqa: BLE001
                with lock:
                    errors.append(f"{name} in a thread raised {_describe(exc)}")

        pool = [threading.Thread(target=work, args=c, daemon=True) for c in calls * 2]
        for t in pool:
            t.start()
        for t in pool:
            t.join(timeout=120)
        _check(sorted(set(errors)), "guard the vendor handle with a lock (NVML and most SMI libraries are not "
                                    "thread-safe per handle)")
