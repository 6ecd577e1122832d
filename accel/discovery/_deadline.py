"""Deadlines and workers: every call into plugin code, under a deadline, in a daemon thread."""

from __future__ import annotations

import contextvars
import math
import os
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ..errors import ConfigError
from ..plugin import BackendConfig

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


#: Says what is wrong with a value a plugin returned (``None``: nothing).
_Check = Callable[[object], "str | None"]


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
