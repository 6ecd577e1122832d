"""A session reads each backend on one kept worker thread, with the same deadline rules as a
fresh thread per call: reads reuse it, a concurrent read does not wait behind another, a hang
still costs one deadline and retires the worker, and closing the session ends it."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import pytest

from accel.discovery import CODE_TIMEOUT, EntryStatus, open_session
from accel.discovery._deadline import _Worker
from accel.model import Health, HostInventory, Telemetry
from accel.plugin import BackendConfig, register
from tests.discovery_isolation._plugins import GATE, TinyBackend, TinyPlugin

DEADLINE = 0.5
FAST = BackendConfig(call_timeout_s=DEADLINE, probe_timeout_s=DEADLINE, enrich_from_sysfs=False)


class ThreadRecorder(TinyBackend):
    """Records the thread of every read; ``block`` holds one inventory() until it is set."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.threads: list[tuple[str, int]] = []
        self.block: threading.Event | None = None
        self.entered = threading.Event()

    def inventory(self) -> HostInventory:
        self.threads.append(("inventory", threading.get_ident()))
        if self.block is not None:
            self.entered.set()
            self.block.wait(5.0)
        return super().inventory()

    def telemetry(self, ids: Sequence[str] | None = None) -> tuple[Telemetry, ...]:
        self.threads.append(("telemetry", threading.get_ident()))
        return super().telemetry(ids)

    def health(self, ids: Sequence[str] | None = None) -> dict[str, Health]:
        self.threads.append(("health", threading.get_ident()))
        return super().health(ids)


class RecorderPlugin(TinyPlugin):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.backend = ThreadRecorder(name)

    def open(self, config: BackendConfig) -> ThreadRecorder:
        return self.backend


def test_reads_reuse_one_worker_thread_off_the_callers_thread() -> None:
    plugin = RecorderPlugin("rec")
    register("rec", lambda: plugin)
    with open_session({"rec": FAST}, backends=["rec"]) as session:
        for _ in range(3):
            session.inventory()
            session.telemetry()
            session.health()
        threads = {ident for _, ident in plugin.backend.threads}
        assert len(plugin.backend.threads) == 9
        assert len(threads) == 1 and threading.get_ident() not in threads
        assert any(t.name == "accel-read-rec" and t.is_alive() for t in threading.enumerate())
    # Closing the session ends the worker.
    deadline = time.monotonic() + 5.0
    while any(t.name == "accel-read-rec" for t in threading.enumerate()) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not any(t.name == "accel-read-rec" for t in threading.enumerate())


def test_a_read_while_the_worker_is_busy_runs_on_its_own_thread_at_once() -> None:
    plugin = RecorderPlugin("rec")
    register("rec", lambda: plugin)
    gate = threading.Event()
    with open_session({"rec": FAST}, backends=["rec"]) as session:
        session.telemetry()  # starts the worker
        plugin.backend.block = gate
        first = threading.Thread(target=session.inventory)
        first.start()
        assert plugin.backend.entered.wait(5.0)
        plugin.backend.block = None
        start = time.monotonic()
        telemetry = session.telemetry()  # must not queue behind the blocked inventory
        assert time.monotonic() - start < DEADLINE
        gate.set()
        first.join(5.0)
    assert len(telemetry) == 2
    idents = [ident for what, ident in plugin.backend.threads]
    assert idents[0] == idents[1] != idents[2]  # worker, worker (blocked), a fresh thread
    assert session.report.entry("rec").status is not EntryStatus.FAILED


def test_a_hang_on_the_worker_costs_one_deadline_and_retires_it() -> None:
    plugin = TinyPlugin("broken", "telemetry")
    register("broken", lambda: plugin)
    start = time.monotonic()
    with open_session({"broken": FAST}, backends=["broken"]) as session:
        assert len(session.inventory().devices) == 2  # on the worker
        assert session.telemetry() == ()  # hangs on the worker: one deadline
        assert session.report.entry("broken").error.code == CODE_TIMEOUT  # type: ignore[union-attr]
        assert "broken" not in session.backends
    assert time.monotonic() - start < DEADLINE + 5.0
    GATE.set()


def test_an_idle_worker_ends_and_a_new_call_starts_another() -> None:
    worker = _Worker("accel-read-idle-test", idle_s=0.05)
    done = threading.Event()
    seen: list[int] = []

    def job() -> None:
        seen.append(threading.get_ident())
        worker.release()
        done.set()

    assert worker.acquire()
    worker.submit(job)
    assert done.wait(5.0)
    deadline = time.monotonic() + 5.0
    while any(t.name == "accel-read-idle-test" for t in threading.enumerate()) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not any(t.name == "accel-read-idle-test" for t in threading.enumerate())
    done.clear()
    assert worker.acquire()
    worker.submit(job)
    assert done.wait(5.0) and len(seen) == 2
    worker.stop()
    assert not worker.acquire()


def test_read_backend_runs_inventory_and_telemetry_in_one_hand_off() -> None:
    plugin = RecorderPlugin("rec")
    register("rec", lambda: plugin)
    with open_session({"rec": FAST}, backends=["rec"]) as session:
        inv, telemetry, failed = session.read_backend("rec")
        assert failed is None and inv is not None and len(inv.devices) == 2 and len(telemetry or ()) == 2
        session.read_backend("rec")
    calls = plugin.backend.threads
    assert [what for what, _ in calls] == ["inventory", "telemetry"] * 2
    assert len({ident for _, ident in calls}) == 1 and threading.get_ident() not in {i for _, i in calls}


@pytest.mark.parametrize(("broken", "how"), [
    ("inventory", "hang"), ("telemetry", "hang"), ("inventory", "junk"), ("telemetry", "junk"),
    ("inventory", "systemexit"),
])
def test_read_backend_fails_the_call_that_failed_and_stops_there(broken: str, how: str) -> None:
    plugin = TinyPlugin("broken", broken, how)
    register("broken", lambda: plugin)
    start = time.monotonic()
    with open_session({"broken": FAST}, backends=["broken"]) as session:
        (backend,) = plugin.opened
        inv, telemetry, failed = session.read_backend("broken")
        elapsed = time.monotonic() - start
        entry = session.report.entry("broken")
        assert failed == broken and telemetry is None
        assert (inv is None) == (broken == "inventory")
        assert entry.status is EntryStatus.FAILED and entry.stage == "read"
        assert f"{broken}()" in (entry.reason or "") or how == "systemexit"
        # The call after the failed one never ran; a hang retired the backend, one deadline.
        assert backend.calls[: 2 if broken == "telemetry" else 1] == ["inventory", "telemetry"][
            : 2 if broken == "telemetry" else 1]
        assert "telemetry" not in backend.calls or broken == "telemetry"
        if how == "hang":
            assert entry.error is not None and entry.error.code == CODE_TIMEOUT
            assert "broken" not in session.backends
            assert elapsed < DEADLINE + 5.0
            assert session.read_backend("broken") == (None, None, "inventory")  # never called again
        else:
            assert "broken" in session.backends  # a raise or junk leaves it open: the next read may work
    GATE.set()
    time.sleep(0.05)
    assert backend.calls.count(broken) == 1 or how != "hang"


def test_a_forked_child_reads_on_its_own_worker() -> None:
    import multiprocessing

    plugin = RecorderPlugin("rec")
    register("rec", lambda: plugin)
    with open_session({"rec": FAST}, backends=["rec"]) as session:
        session.inventory()  # the parent's worker is running now
        ctx = multiprocessing.get_context("fork")
        result = ctx.Queue()

        def child() -> None:
            start = time.monotonic()
            inv, _samples, failed = session.read_backend("rec")
            result.put((failed, len(inv.devices) if inv else 0, time.monotonic() - start))

        proc = ctx.Process(target=child)
        proc.start()
        failed, devices, elapsed = result.get(timeout=10)
        proc.join(10)
    assert failed is None and devices == 2 and elapsed < DEADLINE
