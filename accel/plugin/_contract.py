"""The contract between accel and a backend plugin.

A vendor plugin ships two objects:

* a light :class:`BackendPlugin` named by an ``accel.backends`` entry point.  Importing its
  module must not import the vendor library.  ``probe()`` is cheap and never raises;
  ``open()`` loads the vendor library and returns a :class:`Backend`.
* the :class:`Backend`: snapshots of inventory, telemetry and health as :mod:`accel.model`
  objects.  Every vendor error is mapped to :mod:`accel.errors` at the plugin's boundary.

Optional surfaces are :func:`typing.runtime_checkable` protocols (:class:`SupportsEvents`,
:class:`SupportsProcesses`, :class:`SupportsPartitions`): callers test them with
``isinstance``, never by vendor name.
"""

from __future__ import annotations

import abc
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, Self, runtime_checkable

from ..errors import AccelError, BackendUnavailableError
from ..model import (
    Health,
    HealthCondition,
    HostInventory,
    Partition,
    PartitionProfile,
    ProcessUsage,
    Telemetry,
)
from ..model._base import Model
from ._capabilities import Capability
from ._readings import Reading
from ._version import ApiVersion

if TYPE_CHECKING:
    from ..tools import Runner

__all__ = [
    "Backend",
    "BackendConfig",
    "BackendPlugin",
    "DeviceEvent",
    "PluginInfo",
    "ProbeResult",
    "ProbeStatus",
    "SupportsEvents",
    "SupportsPartitions",
    "SupportsProcesses",
]


class PluginInfo(Model):
    """What a plugin says about itself.  Every capability is absent unless declared."""

    name: str
    vendor: str
    version: str
    api_versions: frozenset[ApiVersion]
    capabilities: frozenset[Capability] = frozenset()
    description: str | None = None
    #: The vendor API or tool the backend reads through (``nvml``, ``npu-smi``...).
    api: str | None = None

    def declares(self, capability: Capability) -> bool:
        return capability in self.capabilities


class ProbeStatus(StrEnum):
    PRESENT = "present"
    ABSENT = "absent"
    ERROR = "error"


class ProbeResult(Model):
    """Outcome of a cheap probe; ``reason`` says why (the PCI ids seen, the missing library...)."""

    status: ProbeStatus
    reason: str = ""
    device_count: int | None = None
    #: An error caused by the user's configuration (an unknown scenario or profile name), not
    #: by the host: the command line exits 2 for it instead of "no accelerator".
    bad_config: bool = False

    @classmethod
    def present(cls, reason: str = "", device_count: int | None = None) -> ProbeResult:
        return cls(status=ProbeStatus.PRESENT, reason=reason, device_count=device_count)

    @classmethod
    def absent(cls, reason: str) -> ProbeResult:
        return cls(status=ProbeStatus.ABSENT, reason=reason)

    @classmethod
    def error(cls, reason: str, *, bad_config: bool = False) -> ProbeResult:
        return cls(status=ProbeStatus.ERROR, reason=reason, bad_config=bad_config)


@dataclass(frozen=True)
class BackendConfig:
    """How a backend is opened.

    ``sysfs_root`` and ``dev_root`` let tests point a backend at a fake tree; ``runner`` is the
    :mod:`accel.tools` runner CLI backends must use (a replay runner in tests); ``options``
    carries backend-specific settings (``profile`` for ``sim``, ``scenario`` for a fake).
    """

    options: Mapping[str, Any] = field(default_factory=dict)
    sysfs_root: Path = Path("/sys")
    dev_root: Path = Path("/dev")
    runner: Runner | None = None
    tool_timeout_s: float = 10.0
    probe_timeout_s: float = 5.0
    #: Deadline of every other call into the plugin (import, open, each read, close).
    #: ``None``: ``2 * tool_timeout_s + 1`` s.  A call past it leaves the backend failed.
    call_timeout_s: float | None = None
    #: Let the core fill PCIe place and NUMA from ``sysfs_root`` (off for replays and fakes).
    enrich_from_sysfs: bool = True
    #: What the caller will use (:class:`~accel.plugin.Reading` groups); ``None``: everything.
    #: A hint: a backend may skip reading the other groups, or ignore it and answer in full
    #: (:class:`~accel.plugin.Reading` says what a backend that narrows must still do).
    readings: frozenset[Reading] | None = None

    def option(self, key: str, default: Any = None) -> Any:
        return self.options.get(key, default)


#: The public methods every backend (and its optional surfaces) answers through; the guard
#: of :class:`Backend` wraps each one a subclass defines.
GUARDED_METHODS = frozenset(
    {
        "inventory",
        "telemetry",
        "health",
        "close",
        "processes",
        "partitions",
        "partition_profiles",
        "create_partition",
        "destroy_partition",
        "poll_events",
        "snapshot",
    }
)


def _guard(fn: Callable[..., Any], method: str) -> Callable[..., Any]:
    @functools.wraps(fn)
    def guarded(self: Backend, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(self, *args, **kwargs)
        except AccelError:
            raise
        except (Exception, SystemExit) as exc:
            # A plugin bug (a KeyError in a parser, a csv.Error, a SystemExit from a vendor
            # library) is this backend's failure, typed, with the cause chained.
            name = _name_of(self)
            raise BackendUnavailableError(
                f"backend {name!r}: {method}() failed: {type(exc).__name__}: {exc}"[:2000], plugin=name
            ) from exc

    guarded.__accel_guarded__ = True  # type: ignore[attr-defined]
    return guarded


def _name_of(backend: Backend) -> str:
    try:
        return str(backend.name)
    except Exception:  # noqa: BLE001 - a broken name property must not hide the real failure
        return type(backend).__name__


class Backend(abc.ABC):
    """An open backend.  Methods return frozen snapshots; ``close()`` is idempotent.

    Only :mod:`accel.errors` types leave a backend: every method of :data:`GUARDED_METHODS`
    that a subclass defines is wrapped so that any other exception (a plugin bug) becomes a
    :class:`~accel.errors.BackendUnavailableError` with the original as its ``__cause__``.
    ``KeyboardInterrupt`` passes (it is the user's).
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for method in GUARDED_METHODS:
            fn = cls.__dict__.get(method)
            if callable(fn) and not getattr(fn, "__accel_guarded__", False):
                setattr(cls, method, _guard(fn, method))

    @property
    @abc.abstractmethod
    def name(self) -> str:
        """The backend id (the entry-point name)."""

    @abc.abstractmethod
    def inventory(self) -> HostInventory:
        """All devices with memory, topology and health as of now."""

    @abc.abstractmethod
    def telemetry(self, ids: Sequence[str] | None = None) -> tuple[Telemetry, ...]:
        """One sample per device (``ids`` filters; unknown ids raise ``DeviceError``)."""

    @abc.abstractmethod
    def health(self, ids: Sequence[str] | None = None) -> dict[str, Health]:
        """Health per device id.  A lost device is reported ``lost``; the others still answer."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the vendor library.  Safe to call twice and after a failure."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class BackendPlugin(abc.ABC):
    """The light object an ``accel.backends`` entry point names.

    Subclasses set :attr:`info` and implement :meth:`probe` and :meth:`open`.  Nothing here
    may import the vendor library at module import time.
    """

    info: PluginInfo

    @abc.abstractmethod
    def probe(self, config: BackendConfig) -> ProbeResult:
        """Cheap and safe: never raises, never loads the vendor library if avoidable."""

    @abc.abstractmethod
    def open(self, config: BackendConfig) -> Backend:
        """Load the vendor library and return a :class:`Backend` (raises ``accel.errors``)."""


class DeviceEvent(Model):
    """A health event of one device (an XID, a RAS interrupt) as a typed condition."""

    device_id: str
    timestamp: datetime
    condition: HealthCondition


@runtime_checkable
class SupportsEvents(Protocol):
    def poll_events(self, timeout_s: float = 0.0) -> tuple[DeviceEvent, ...]:
        """Events since the last poll; waits up to ``timeout_s`` for the first one."""
        ...


@runtime_checkable
class SupportsProcesses(Protocol):
    def processes(self, ids: Sequence[str] | None = None) -> tuple[ProcessUsage, ...]:
        """Processes using the devices (``memory_bytes`` is ``None`` when unknown)."""
        ...


@runtime_checkable
class SupportsPartitions(Protocol):
    def partitions(self) -> tuple[Partition, ...]:
        """Live hardware partitions."""
        ...

    def partition_profiles(self) -> tuple[PartitionProfile, ...]:
        """Profiles each device can be partitioned into."""
        ...
