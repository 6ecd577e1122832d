"""The NVML session state every collaborator shares: device handles, lost GPUs, one read.

:class:`Handles` owns what the backend's collaborators read through: the :class:`Nvml` wrapper,
the device handle per index (handles are unhashable, so keyed by index), the NVML symbols this
driver lacks (FunctionNotFound once: not retried), and when each GPU was found lost.
:class:`NvmlPart` is the base of every collaborator: its ``_get`` is the one way a value is read
(``None`` with the reason recorded in a :class:`Read`; GpuIsLost propagates).

The call shape ``self._get(read, field, "nvmlX", *args)`` is what
``tests/nvidia/test_nvml_conventions.py`` walks to check every call against the real binding.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ...errors import AccelError, DeviceLostError
from ...model import HealthCondition
from ._health import nvml_error_condition
from ._nvml import C, Nvml, nvml_code_of

__all__ = ["Handles", "NvmlPart", "Read", "now", "text"]


def now() -> datetime:
    return datetime.now(UTC)


def text(value: Any) -> str:
    # nvidia-ml-py >= 11.515.48 returns str; older and third-party bindings return bytes.
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


@dataclass
class Read:
    """Collects what one device's reads learned besides values: unsupported fields, conditions."""

    unsupported: set[str] = field(default_factory=set)
    conditions: list[HealthCondition] = field(default_factory=list)
    #: When set, GpuIsLost is recorded in ``lost`` instead of raised (identity reads of a GPU
    #: that falls off the bus while it is being enumerated).
    tolerate_lost: bool = False
    lost: bool = False
    #: The current MIG mode as the MIG reader read it (None: not read or no MIG mode).
    mig_enabled: bool | None = None


class Handles:
    """The open NVML session's handles, missing symbols and lost GPUs (see the module docstring)."""

    def __init__(self, nv: Nvml) -> None:
        self.nv = nv
        self.handles: dict[int, Any] = {}
        #: NVML symbols this driver lacks (FunctionNotFound): not retried on every snapshot.
        self.missing: set[str] = set()
        #: GPU index -> when it was first found lost (it stays lost until the backend is reopened).
        self.lost: dict[int, datetime] = {}

    def handle(self, index: int) -> Any:
        """The cached handle of GPU ``index``."""
        h = self.handles.get(index)
        if h is None:
            try:
                h = self.nv.call("nvmlDeviceGetHandleByIndex", index)
            except DeviceLostError:
                self.lost.setdefault(index, now())
                raise
            self.handles[index] = h
        return h

    def get(self, read: Read, field_name: str | None, fn: str, *args: Any,
            fallback: str | None = None, **kwargs: Any) -> Any:
        """One read: the value, or ``None`` with the reason recorded.  GpuIsLost propagates."""
        if fallback is None:
            names: tuple[str, ...] = (fn,)
        else:
            # A symbol the driver lacks stays missing; skip it rather than pay a failed call each time.
            names = tuple(n for n in (fn, fallback) if n not in self.missing) or (fallback,)
        for name in names:
            try:
                return self.nv.call(name, *args, **kwargs)
            except DeviceLostError:
                if not read.tolerate_lost:
                    raise
                read.lost = True
                return None
            except AccelError as err:
                code = nvml_code_of(err)
                if code == C.ERROR_FUNCTION_NOT_FOUND:
                    self.missing.add(name)
                if code == C.ERROR_FUNCTION_NOT_FOUND and name != names[-1]:
                    continue
                if code in (C.ERROR_NOT_SUPPORTED, C.ERROR_FUNCTION_NOT_FOUND):
                    if field_name:
                        read.unsupported.add(field_name)
                    return None
                if code is not None:
                    cond = nvml_error_condition(code, at=now(), fn=name)
                    if cond is not None and all(c.reason != cond.reason for c in read.conditions):
                        read.conditions.append(cond)
                return None
        return None

    def mark_lost(self, index: int, at: datetime) -> None:
        self.lost.setdefault(index, at)


class NvmlPart:
    """Base of the backend's collaborators: reads through the session's shared :class:`Handles`."""

    def __init__(self, handles: Handles) -> None:
        self._handles = handles
        self._nv = handles.nv

    def _handle(self, index: int) -> Any:
        return self._handles.handle(index)

    def _get(self, read: Read, field_name: str | None, fn: str, *args: Any,
             fallback: str | None = None, **kwargs: Any) -> Any:
        return self._handles.get(read, field_name, fn, *args, fallback=fallback, **kwargs)

    @property
    def _lost(self) -> dict[int, datetime]:
        return self._handles.lost
