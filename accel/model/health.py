"""Health: two axes (state, operational) derived from typed conditions by one rule.

A plugin never sets ``Health.state`` by hand: it reports *conditions* (with a severity, a
normalised reason, a vendor code such as ``nvidia.xid:79`` and a recommended action) plus the
device's ``operational`` status, and :func:`derive_state` turns them into the state.  That
keeps every vendor's "unhealthy" meaning the same thing.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import Field, computed_field, model_validator

from ._base import Model, NonNegInt

__all__ = [
    "Action",
    "ConditionScope",
    "Health",
    "HealthCondition",
    "HealthState",
    "Operational",
    "Severity",
    "Subsystem",
    "derive_state",
]


class HealthState(StrEnum):
    HEALTHY = "healthy"
    DEGRADED = "degraded"
    UNHEALTHY = "unhealthy"
    UNKNOWN = "unknown"


class Operational(StrEnum):
    ONLINE = "online"
    DRAINING = "draining"
    RESETTING = "resetting"
    MAINTENANCE = "maintenance"
    OFFLINE = "offline"
    LOST = "lost"


class Severity(StrEnum):
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"
    CRITICAL = "critical"
    FATAL = "fatal"

    @property
    def rank(self) -> int:
        return _SEVERITY_RANK[self]


_SEVERITY_RANK = {
    Severity.INFO: 0,
    Severity.WARNING: 1,
    Severity.ERROR: 2,
    Severity.CRITICAL: 3,
    Severity.FATAL: 4,
}


class Subsystem(StrEnum):
    DEVICE = "device"
    MEMORY = "memory"
    COMPUTE = "compute"
    INTERCONNECT = "interconnect"
    PCIE = "pcie"
    THERMAL = "thermal"
    POWER = "power"
    FIRMWARE = "firmware"
    DRIVER = "driver"
    PARTITION = "partition"
    BOARD = "board"
    MONITORING = "monitoring"


class ConditionScope(StrEnum):
    PROCESS = "process"
    PARTITION = "partition"
    DEVICE = "device"
    BOARD = "board"
    NODE = "node"
    FABRIC = "fabric"


class Action(StrEnum):
    NONE = "none"
    RESTART_APP = "restart_app"
    RESET_DEVICE = "reset_device"
    DRAIN_P2P = "drain_p2p"
    DRAIN_AND_RESET = "drain_and_reset"
    REBOOT_NODE = "reboot_node"
    ISOLATE = "isolate"
    RESEAT_OR_CHECK_MECHANICALS = "reseat_or_check_mechanicals"
    UPDATE_SOFTWARE = "update_software"
    REPLACE_HARDWARE = "replace_hardware"
    CHECK_COOLING = "check_cooling"
    INVESTIGATE = "investigate"


#: Actions that mean "usable now, but a reset is pending": a warning with one of these degrades.
_PENDING_RESET = {Action.RESET_DEVICE, Action.DRAIN_AND_RESET, Action.DRAIN_P2P}


class HealthCondition(Model):
    """One observed problem (or an informational fact) about a device.

    ``reason`` is a normalised CamelCase cause (``UncorrectableMemoryError``); ``vendor_code``
    keeps the vendor's own identifier in its published form (``nvidia.xid:79``,
    ``huawei.npu:0x80E18401``, ``amd.ras:UMC/MULT_UC``).
    """

    subsystem: Subsystem
    reason: str = Field(min_length=1, pattern=r"^[A-Z][A-Za-z0-9]*$")
    severity: Severity
    scope: ConditionScope = ConditionScope.DEVICE
    action: Action = Action.NONE
    vendor_code: str | None = Field(default=None, pattern=r"^[a-z0-9_-]+\.[a-z0-9_.-]+:.+$")
    message: str | None = None
    active: bool = True
    count: NonNegInt = 1
    first_seen: datetime | None = None
    last_seen: datetime | None = None


def derive_state(
    conditions: tuple[HealthCondition, ...] | list[HealthCondition],
    operational: Operational = Operational.ONLINE,
    monitored: bool = True,
) -> HealthState:
    """The one rule that maps conditions to a state, for every vendor.

    - a ``lost`` or ``offline`` device is unhealthy;
    - process-scoped conditions (an application's own fault) never change the device state;
    - among active conditions the worst severity decides: critical/fatal -> unhealthy,
      error -> degraded, warning with a pending reset action -> degraded, info/warning -> healthy;
    - with nothing worse than that, a device whose health cannot be monitored is unknown,
      never healthy.
    """
    if operational in (Operational.LOST, Operational.OFFLINE):
        return HealthState.UNHEALTHY
    worst = -1
    pending_reset = False
    for cond in conditions:
        if not cond.active or cond.scope is ConditionScope.PROCESS:
            continue
        worst = max(worst, cond.severity.rank)
        if cond.severity is Severity.WARNING and cond.action in _PENDING_RESET:
            pending_reset = True
    if worst >= Severity.CRITICAL.rank:
        return HealthState.UNHEALTHY
    if worst == Severity.ERROR.rank or pending_reset:
        return HealthState.DEGRADED
    if operational in (Operational.DRAINING, Operational.RESETTING, Operational.MAINTENANCE):
        return HealthState.DEGRADED
    if not monitored:
        return HealthState.UNKNOWN
    return HealthState.HEALTHY


class Health(Model):
    """A device's health.  ``state`` is derived, never stored independently.

    Health is earned: ``monitored`` means something was read that tells the device's health
    (a health or status column, ECC counters, a status call) at ``checked_at``.  Without
    ``checked_at`` nothing was read, so ``monitored`` is False and, with no condition worse
    than a warning, the state is ``unknown``, never ``healthy``.  A backend whose tool prints
    no health passes no ``checked_at``; one that read health passes the time it read it.
    """

    operational: Operational = Operational.ONLINE
    monitored: bool = True
    conditions: tuple[HealthCondition, ...] = ()
    checked_at: datetime | None = None

    @model_validator(mode="before")
    @classmethod
    def _drop_derived(cls, data: Any) -> Any:
        # ``state`` appears in serialised output; accept it back on load but recompute it.
        if isinstance(data, dict) and "state" in data:
            data = dict(data)
            data.pop("state")
        # No reading time, no reading: "monitored" without ``checked_at`` is not earned.
        if isinstance(data, dict) and data.get("checked_at") is None and data.get("monitored", True):
            data = dict(data)
            data["monitored"] = False
        return data

    @computed_field  # type: ignore[prop-decorator]
    @property
    def state(self) -> HealthState:
        return derive_state(self.conditions, self.operational, self.monitored)

    @classmethod
    def unknown(cls) -> Health:
        """Health of a device whose health the backend cannot read at all."""
        return cls(monitored=False)

    @classmethod
    def read(cls, checked_at: datetime, conditions: tuple[HealthCondition, ...] = (), *,
             operational: Operational = Operational.ONLINE) -> Health:
        """Health from a reading taken at ``checked_at`` (the only way to ``healthy``)."""
        return cls(operational=operational, monitored=True, conditions=conditions, checked_at=checked_at)
