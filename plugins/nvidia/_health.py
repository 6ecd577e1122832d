"""NVIDIA health mapping tables: XIDs and NVML counters to typed conditions.

The tables follow ``shared/reference/device-model.md`` section 4.3, the NVIDIA k8s-device-plugin
(XIDs 13, 31, 43, 45, 68 and 109 are the application's own faults and never change the device's
state; every other XID, known or not, is treated as a device fault) and the DCGM health-watch
rules (volatile DBE, pending retirement, row-remap failure, NVLink replay/recovery, link down).
NOT_SUPPORTED and NO_PERMISSION never produce a condition here: they leave a value unknown.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from ...model import Action, ConditionScope, HealthCondition, Severity, Subsystem

__all__ = [
    "APPLICATION_XIDS",
    "XID_TABLE",
    "XidRule",
    "counter_conditions",
    "lost_condition",
    "nvml_error_condition",
    "throttle_conditions",
    "xid_condition",
]


@dataclass(frozen=True)
class XidRule:
    """How one XID maps to a condition.  ``lost`` marks the device ``operational=lost``."""

    subsystem: Subsystem
    reason: str
    severity: Severity
    action: Action
    scope: ConditionScope = ConditionScope.DEVICE
    description: str = ""
    lost: bool = False


_APP = ConditionScope.PROCESS

#: XIDs that are the application's fault (k8s-device-plugin's default ignore list).
APPLICATION_XIDS: Final = frozenset({13, 31, 43, 45, 68, 109})

XID_TABLE: Final[Mapping[int, XidRule]] = {
    13: XidRule(Subsystem.COMPUTE, "ApplicationFault", Severity.WARNING, Action.RESTART_APP, _APP,
                "Graphics engine exception"),
    31: XidRule(Subsystem.COMPUTE, "ApplicationFault", Severity.WARNING, Action.RESTART_APP, _APP,
                "GPU memory page fault (MMU fault)"),
    43: XidRule(Subsystem.COMPUTE, "ApplicationFault", Severity.WARNING, Action.RESTART_APP, _APP,
                "GPU stopped processing (channel stop)"),
    45: XidRule(Subsystem.COMPUTE, "ApplicationFault", Severity.INFO, Action.RESTART_APP, _APP,
                "Preemptive cleanup after a previous error"),
    68: XidRule(Subsystem.COMPUTE, "ApplicationFault", Severity.WARNING, Action.RESTART_APP, _APP,
                "Video processor (NVDEC) exception"),
    109: XidRule(Subsystem.COMPUTE, "ApplicationFault", Severity.WARNING, Action.RESTART_APP, _APP,
                 "Context switch timeout"),
    48: XidRule(Subsystem.MEMORY, "UncorrectableMemoryError", Severity.CRITICAL, Action.RESET_DEVICE,
                description="Double-bit ECC error"),
    61: XidRule(Subsystem.FIRMWARE, "FirmwareError", Severity.CRITICAL, Action.RESET_DEVICE,
                description="Internal micro-controller breakpoint/warning"),
    62: XidRule(Subsystem.FIRMWARE, "FirmwareError", Severity.CRITICAL, Action.RESET_DEVICE,
                description="Internal micro-controller halt"),
    63: XidRule(Subsystem.MEMORY, "RowRemapPending", Severity.WARNING, Action.RESET_DEVICE,
                description="ECC page retirement or row remapping recorded"),
    64: XidRule(Subsystem.MEMORY, "RowRemapFailure", Severity.CRITICAL, Action.REPLACE_HARDWARE,
                description="ECC page retirement or row remapper failure"),
    74: XidRule(Subsystem.INTERCONNECT, "LinkError", Severity.ERROR, Action.RESET_DEVICE,
                description="NVLink error"),
    79: XidRule(Subsystem.PCIE, "DeviceLost", Severity.FATAL, Action.REBOOT_NODE,
                description="GPU has fallen off the bus", lost=True),
    92: XidRule(Subsystem.MEMORY, "HighCorrectableErrorRate", Severity.WARNING, Action.INVESTIGATE,
                description="High single-bit ECC error rate"),
    94: XidRule(Subsystem.MEMORY, "ContainedMemoryError", Severity.ERROR, Action.RESTART_APP, _APP,
                "Contained ECC error (only the affected application is terminated)"),
    95: XidRule(Subsystem.MEMORY, "UncontainedMemoryError", Severity.CRITICAL, Action.RESET_DEVICE,
                description="Uncontained ECC error"),
    119: XidRule(Subsystem.FIRMWARE, "FirmwareError", Severity.CRITICAL, Action.RESET_DEVICE,
                 description="GSP RPC timeout"),
    120: XidRule(Subsystem.FIRMWARE, "FirmwareError", Severity.CRITICAL, Action.RESET_DEVICE,
                 description="GSP error"),
    154: XidRule(Subsystem.DEVICE, "RecoveryActionRequired", Severity.CRITICAL, Action.RESET_DEVICE,
                 description="GPU recovery action changed (read the recovery action field)"),
}

#: What an XID missing from the table becomes: never ignored (k8s-device-plugin marks the device
#: unhealthy on any XID outside its ignore list), but the action is to investigate.
_UNKNOWN_XID = XidRule(Subsystem.DEVICE, "UnknownXid", Severity.CRITICAL, Action.INVESTIGATE,
                       description="XID not in the accel mapping table")

#: NVML recovery actions (field 230) -> accel action.
RECOVERY_ACTIONS: Final[Mapping[int, Action]] = {
    0: Action.NONE,
    1: Action.RESET_DEVICE,
    2: Action.REBOOT_NODE,
    3: Action.DRAIN_P2P,
    4: Action.DRAIN_AND_RESET,
}


def xid_rule(xid: int) -> XidRule:
    """The rule for ``xid``; unknown XIDs (including NVML's 999) get the unknown rule."""
    return XID_TABLE.get(xid, _UNKNOWN_XID)


def xid_condition(
    xid: int,
    *,
    at: datetime,
    count: int = 1,
    first_seen: datetime | None = None,
    partition: str | None = None,
) -> HealthCondition:
    """The condition for one XID (``vendor_code`` ``nvidia.xid:<n>``)."""
    rule = xid_rule(xid)
    scope = rule.scope
    if partition is not None and scope is ConditionScope.DEVICE:
        scope = ConditionScope.PARTITION
    where = f" on {partition}" if partition else ""
    return HealthCondition(
        subsystem=rule.subsystem,
        reason=rule.reason,
        severity=rule.severity,
        scope=scope,
        action=rule.action,
        vendor_code=f"nvidia.xid:{xid}",
        message=f"XID {xid}: {rule.description}{where}",
        count=count,
        first_seen=first_seen or at,
        last_seen=at,
    )


def lost_condition(at: datetime, message: str = "GPU is lost (NVML_ERROR_GPU_IS_LOST)") -> HealthCondition:
    return HealthCondition(
        subsystem=Subsystem.PCIE,
        reason="DeviceLost",
        severity=Severity.FATAL,
        action=Action.REBOOT_NODE,
        vendor_code="nvidia.nvml:15",
        message=message,
        first_seen=at,
        last_seen=at,
    )


#: NVML error codes that describe the device's own state (anything else is a read failure).
_NVML_DEVICE_ERRORS: Final[Mapping[int, tuple[Subsystem, str, Severity, Action]]] = {
    8: (Subsystem.POWER, "InsufficientPower", Severity.CRITICAL, Action.RESEAT_OR_CHECK_MECHANICALS),
    11: (Subsystem.DEVICE, "InterruptIssue", Severity.CRITICAL, Action.RESET_DEVICE),
    14: (Subsystem.FIRMWARE, "CorruptedInforom", Severity.WARNING, Action.INVESTIGATE),
    16: (Subsystem.DEVICE, "ResetRequired", Severity.CRITICAL, Action.RESET_DEVICE),
}


def nvml_error_condition(code: int, *, at: datetime, fn: str) -> HealthCondition | None:
    """A condition for an NVML error that says something about the device, else ``None``."""
    row = _NVML_DEVICE_ERRORS.get(code)
    if row is None:
        return None
    subsystem, reason, severity, action = row
    return HealthCondition(
        subsystem=subsystem, reason=reason, severity=severity, action=action,
        vendor_code=f"nvidia.nvml:{code}", message=f"{fn} returned NVML error {code}",
        first_seen=at, last_seen=at,
    )


@dataclass(frozen=True)
class Counters:
    """Health-relevant counters of one device; ``None`` is unknown (not supported / no permission)."""

    dbe_volatile: int | None = None
    sbe_volatile: int | None = None
    dbe_aggregate: int | None = None
    retired_sbe: int | None = None
    retired_dbe: int | None = None
    retired_pending: bool | None = None
    remap_pending: bool | None = None
    remap_failure: bool | None = None
    nvlink_replay: int | None = None
    nvlink_recovery: int | None = None
    nvlink_crc: int | None = None
    links_down: tuple[int, ...] = ()


#: DCGM's retired-page limit (dcgm_gpu_hardware_limits.h: SBE+DBE retired pages >= 63 fails).
RETIRED_PAGES_LIMIT: Final = 63


def _cond(subsystem: Subsystem, reason: str, severity: Severity, action: Action, code: str,
          message: str, at: datetime) -> HealthCondition:
    return HealthCondition(subsystem=subsystem, reason=reason, severity=severity, action=action,
                           vendor_code=f"nvidia.dcgm:{code}", message=message, first_seen=at,
                           last_seen=at)


def counter_conditions(c: Counters, *, at: datetime,
                       previous: Counters | None = None) -> list[HealthCondition]:
    """DCGM-style conditions from one reading (and the previous one, for NVLink deltas)."""
    out: list[HealthCondition] = []
    if c.dbe_volatile:
        out.append(_cond(Subsystem.MEMORY, "UncorrectableMemoryError", Severity.CRITICAL,
                         Action.RESET_DEVICE, "DCGM_FR_VOLATILE_DBE_DETECTED",
                         f"{c.dbe_volatile} volatile double-bit ECC errors", at))
    if c.retired_pending:
        out.append(_cond(Subsystem.MEMORY, "PageRetirementPending", Severity.WARNING,
                         Action.RESET_DEVICE, "DCGM_FR_PENDING_PAGE_RETIREMENTS",
                         "pages are pending retirement; reset the GPU to retire them", at))
    retired = (c.retired_sbe or 0) + (c.retired_dbe or 0)
    if retired >= RETIRED_PAGES_LIMIT:
        out.append(_cond(Subsystem.MEMORY, "RetiredPagesLimit", Severity.CRITICAL,
                         Action.REPLACE_HARDWARE, "DCGM_FR_RETIRED_PAGES_LIMIT",
                         f"{retired} retired pages (limit {RETIRED_PAGES_LIMIT})", at))
    if c.remap_failure:
        out.append(_cond(Subsystem.MEMORY, "RowRemapFailure", Severity.CRITICAL,
                         Action.REPLACE_HARDWARE, "DCGM_FR_ROW_REMAP_FAILURE",
                         "row remapping failed: no spare rows left", at))
    if c.remap_pending:
        out.append(_cond(Subsystem.MEMORY, "RowRemapPending", Severity.WARNING,
                         Action.RESET_DEVICE, "DCGM_FR_PENDING_ROW_REMAP",
                         "a row remap is pending; reset the GPU to apply it", at))
    for link in c.links_down:
        out.append(_cond(Subsystem.INTERCONNECT, "LinkDown", Severity.CRITICAL, Action.RESET_DEVICE,
                         "DCGM_FR_NVLINK_DOWN", f"NVLink {link} is down", at))
    grew = previous is not None and (
        (c.nvlink_replay or 0) > (previous.nvlink_replay or 0)
        or (c.nvlink_recovery or 0) > (previous.nvlink_recovery or 0)
    )
    if c.nvlink_recovery:
        out.append(_cond(Subsystem.INTERCONNECT, "NvLinkRecoveryErrors",
                         Severity.ERROR, Action.RESET_DEVICE, "DCGM_FR_NVLINK_ERROR_CRITICAL",
                         f"{c.nvlink_recovery} NVLink recovery errors since driver load", at))
    if c.nvlink_replay:
        out.append(_cond(Subsystem.INTERCONNECT, "NvLinkReplayErrors",
                         Severity.ERROR if grew else Severity.WARNING, Action.INVESTIGATE,
                         "DCGM_FR_NVLINK_ERROR_THRESHOLD",
                         f"{c.nvlink_replay} NVLink replay errors since driver load"
                         + (" (increasing)" if grew else ""), at))
    if c.nvlink_crc:
        out.append(_cond(Subsystem.INTERCONNECT, "NvLinkCrcErrors", Severity.WARNING, Action.INVESTIGATE,
                         "DCGM_FR_NVLINK_ERROR_THRESHOLD",
                         f"{c.nvlink_crc} NVLink CRC errors since driver load", at))
    return out


#: Clock-event reason bit -> (name in telemetry, condition or None).
THROTTLE_REASONS: Final[Mapping[int, tuple[str, tuple[Subsystem, str, Severity, Action] | None]]] = {
    0x1: ("gpu_idle", None),
    0x2: ("applications_clocks_setting", None),
    0x4: ("sw_power_cap", (Subsystem.POWER, "PowerCapped", Severity.INFO, Action.NONE)),
    0x8: ("hw_slowdown", (Subsystem.THERMAL, "HardwareSlowdown", Severity.WARNING, Action.INVESTIGATE)),
    0x10: ("sync_boost", None),
    0x20: ("sw_thermal_slowdown", (Subsystem.THERMAL, "Throttled", Severity.WARNING, Action.CHECK_COOLING)),
    0x40: ("hw_thermal_slowdown", (Subsystem.THERMAL, "Throttled", Severity.WARNING, Action.CHECK_COOLING)),
    0x80: ("hw_power_brake_slowdown",
           (Subsystem.POWER, "PowerBrake", Severity.WARNING, Action.RESEAT_OR_CHECK_MECHANICALS)),
    0x100: ("display_clock_setting", None),
}


def throttle_names(mask: int) -> tuple[str, ...]:
    return tuple(name for bit, (name, _) in THROTTLE_REASONS.items() if mask & bit)


def throttle_conditions(mask: int, *, at: datetime) -> list[HealthCondition]:
    out: list[HealthCondition] = []
    seen: set[str] = set()
    for bit, (name, rule) in THROTTLE_REASONS.items():
        if not mask & bit or rule is None or rule[1] in seen:
            continue
        seen.add(rule[1])
        subsystem, reason, severity, action = rule
        out.append(HealthCondition(subsystem=subsystem, reason=reason, severity=severity, action=action,
                                   vendor_code=f"nvidia.clocks_event:{name}",
                                   message=f"clocks reduced: {name}", first_seen=at, last_seen=at))
    return out


def temperature_conditions(temp: int | None, slowdown: int | None, shutdown: int | None, *,
                           at: datetime) -> list[HealthCondition]:
    if temp is None:
        return []
    if shutdown is not None and temp >= shutdown:
        return [HealthCondition(subsystem=Subsystem.THERMAL, reason="OverTemperature",
                                severity=Severity.CRITICAL, action=Action.CHECK_COOLING,
                                vendor_code="nvidia.nvml:temperature_shutdown",
                                message=f"{temp} C at or above the shutdown threshold {shutdown} C",
                                first_seen=at, last_seen=at)]
    if slowdown is not None and temp >= slowdown:
        return [HealthCondition(subsystem=Subsystem.THERMAL, reason="OverTemperature",
                                severity=Severity.WARNING, action=Action.CHECK_COOLING,
                                vendor_code="nvidia.nvml:temperature_slowdown",
                                message=f"{temp} C at or above the slowdown threshold {slowdown} C",
                                first_seen=at, last_seen=at)]
    return []
