"""A vendor backend with two read paths: its management library, else its CLI.

:class:`DualPathBackend` is a :class:`~accel.toolkit.ToolBackend` whose snapshot comes from the
vendor library when :func:`~accel.toolkit.choose_read_path` picks it (``-o read=native|cli|auto``)
and from the tool otherwise.  Both paths build devices with the same
:meth:`~accel.toolkit.ToolBackend.build` (same ids, bindings, health rules); the native one
spawns no process: its source's ``api`` is the library, ``tool_invocations`` 0, and its
``detail`` starts with the path taken and why (:func:`~accel.toolkit.path_note`).

A subclass sets ``library`` (the file name, for messages), ``native_table`` and
``native_errors``, and implements :meth:`load_native` (the real library, via
:func:`~accel.toolkit.load_library`), :meth:`fake_native` (the faithful fake of a replay),
:meth:`collect_cli` (the CLI read it had) and :meth:`collect_native`.  Where the library has
events, it implements :meth:`read_events` and adds :class:`NativeEventsSurface` (``poll_events``);
:meth:`native_events` returns them and keeps each event's condition on its device
(:meth:`event_conditions`), so a fault seen once stays in the device's health for the life of
the backend.
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Callable, Sequence
from typing import ClassVar, TypeVar

from accel.errors import DriverError
from accel.model import HealthCondition
from accel.plugin import BackendConfig, DeviceEvent
from accel.tools import Runner

from ._native import ErrorTable, NativeLibrary, SignatureTable, _Worker
from ._native_path import ReadChoice, choose_read_path, path_note
from ._snapshot import Snapshot
from ._tool import Collection, ToolBackend

__all__ = ["DualPathBackend", "NativeEventsSurface"]

T = TypeVar("T")


class DualPathBackend(ToolBackend):
    """See the module docstring."""

    library: ClassVar[str]
    native_table: ClassVar[SignatureTable]
    native_errors: ClassVar[ErrorTable | None] = None
    #: Deadline of one whole native read (every call of one snapshot, made in one worker
    #: thread: one thread handoff per snapshot, not one per call).  A read that does not return
    #: in time raises :class:`~accel.errors.DriverError` (``driver.timeout``), and every later
    #: read raises the same without calling the library again: a hung driver is reported, never
    #: waited on twice.  ``None``: calls are made in the caller's thread, without a deadline.
    native_deadline_s: ClassVar[float | None] = 10.0

    def __init__(self, config: BackendConfig, runner: Runner) -> None:
        self.read_choice: ReadChoice = choose_read_path(
            config, runner, library=self.library, load=self.load_native, fake=self.fake_native
        )
        self.native: NativeLibrary | None = None
        if self.read_choice.library is not None:
            # No per-call thread: the whole read runs under one deadline (_in_worker).
            self.native = NativeLibrary(self.read_choice.library, self.native_table, self.native_errors, timeout_s=None)
        self._event_conditions: dict[str, list[HealthCondition]] = {}
        self._worker: _Worker | None = None
        self._worker_lock = threading.Lock()
        self._hung = False
        super().__init__(config, runner)

    @property
    def read_path(self) -> str:
        """``native`` or ``cli``: the path this backend reads."""
        return self.read_choice.path

    def tool_name(self) -> str:
        # On the native path the "tool" of the snapshot's source is the library.
        return self.library if self.native is not None else super().tool_name()

    def collect(self, col: Collection) -> Snapshot:
        col.notes.append(path_note(self.read_choice))
        native = self.native
        if native is None:
            return self.collect_cli(col)
        return self._in_worker(lambda: self.collect_native(col, native))

    def _in_worker(self, job: Callable[[], T], *, extra_s: float = 0.0) -> T:
        """``job`` (a whole read) in the library's worker thread, under ``native_deadline_s``;
        run directly when already on that thread (a read polling events) or without a deadline."""
        worker = self._worker
        if self.native_deadline_s is None or (worker is not None and threading.current_thread() is worker._thread):
            return job()
        with self._worker_lock:
            if self._hung:
                raise DriverError(
                    f"{self.library} hung in an earlier read; not called again",
                    vendor_code=f"{self.library}:hung",
                    code="driver.timeout",
                )
            if self._worker is None:
                self._worker = _Worker(self.library)
            slot = self._worker.submit(job)
            if not slot.done.wait(self.native_deadline_s + extra_s):
                self._hung = True
                self._worker = None  # stuck in the library; a daemon thread, never reused
                raise DriverError(
                    f"{self.library}: a read did not return within {self.native_deadline_s} s",
                    vendor_code=f"{self.library}:hung",
                    code="driver.timeout",
                )
        if slot.error is not None:
            raise slot.error
        result: T = slot.value
        return result

    @abc.abstractmethod
    def load_native(self) -> object:
        """Load the real library (raises :class:`~accel.errors.LibraryNotFoundError`)."""

    @abc.abstractmethod
    def fake_native(self, runner: Runner) -> object:
        """The faithful fake of the host the replay ``runner`` answers from."""

    @abc.abstractmethod
    def collect_cli(self, col: Collection) -> Snapshot:
        """The CLI read (what ``collect`` of a plain :class:`ToolBackend` does)."""

    @abc.abstractmethod
    def collect_native(self, col: Collection, lib: NativeLibrary) -> Snapshot:
        """The native read: build units with :meth:`build` and return ``col.snapshot(...)``."""

    def read_events(self, lib: NativeLibrary, timeout_s: float) -> Sequence[DeviceEvent]:
        """The library's events since the last call (none where it has no subscription)."""
        return ()

    def native_events(self, timeout_s: float = 0.0) -> tuple[DeviceEvent, ...]:
        """Events since the last call, waiting up to ``timeout_s`` for the first (native path;
        the CLI path has none).  Each event's condition stays on its device
        (:meth:`event_conditions`).  Public as ``poll_events`` through
        :class:`NativeEventsSurface`, for a library that has events."""
        native = self.native
        if native is None:
            return ()
        events = tuple(self._in_worker(lambda: self.read_events(native, timeout_s), extra_s=max(0.0, timeout_s)))
        for ev in events:
            self._event_conditions.setdefault(ev.device_id, []).append(ev.condition)
        return events

    def event_conditions(self, device_id: str) -> list[HealthCondition]:
        """The conditions of the events :meth:`native_events` delivered for ``device_id``."""
        return list(self._event_conditions.get(device_id, ()))

    def close(self) -> None:
        if self.native is not None:
            self.native.close()
        if self._worker is not None:
            self._worker.stop()
            self._worker = None
        super().close()


class NativeEventsSurface(DualPathBackend):
    """Mixin: :meth:`DualPathBackend.native_events` as ``SupportsEvents.poll_events`` (declare
    ``Capability.EVENTS``).  Only a backend whose library has an event or fault subscription
    takes it: without it a backend does not claim to stream events."""

    def poll_events(self, timeout_s: float = 0.0) -> tuple[DeviceEvent, ...]:
        """Events since the last poll (the native path; the CLI path has none)."""
        return self.native_events(timeout_s)
