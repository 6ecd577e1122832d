"""Health mapping for ROCm-family GPUs: readings -> typed conditions (reference section 3.3).

The table, one row per source, worst first:

=========================================  ==============  ==========  =========================
reading                                    subsystem       severity    reason / vendor code
=========================================  ==============  ==========  =========================
uncorrectable ECC count > 0 (per block)    memory, ...     critical    UncorrectableEccError
                                                                       ``amd.ras:<BLOCK>/ue``
RAS block state MULT_UC                    per block       critical    RasUncorrectable
                                                                       ``amd.ras:<BLOCK>/MULT_UC``
RAS block state POISON                     per block       error       RasPoison
bad pages >= bad_page_threshold            memory          critical    BadPageThresholdExceeded
                                                                       ``amd.badpages:threshold``
bad pages that could not be reserved       memory          error       BadPageUnreservable
bad pages pending retirement               memory          warning     RetiredPagePending (reset)
deferred ECC count > 0                     memory, ...     warning     DeferredEccError
correctable ECC count > 0                  memory, ...     info        CorrectableEccErrors
xGMI error status MULTIPLE / ERROR         interconnect    error/warn  XgmiErrors ``amd.xgmi:2``
xGMI link reported down ("D")              interconnect    error       XgmiLinkDown
throttle / violation active                thermal, power  warning     ThermalThrottle / PowerCap
=========================================  ==============  ==========  =========================

Interconnect failures are ``error`` (the device degrades, with ``drain_p2p``), not critical:
the GPU still computes on its own.  "Not supported" never becomes a condition; a device whose
RAS cannot be read at all is reported with ``monitored=False`` so its state is unknown.
"""

from __future__ import annotations

from accel.model import Action, HealthCondition, Severity, Subsystem

from ._readings import GpuReading

__all__ = ["conditions_for", "health_monitored"]

_BLOCK_SUBSYSTEM = {
    "UMC": Subsystem.MEMORY,
    "HDP": Subsystem.MEMORY,
    "MMHUB": Subsystem.MEMORY,
    "XGMI_WAFL": Subsystem.INTERCONNECT,
    "XGMI": Subsystem.INTERCONNECT,
    "PCIE_BIF": Subsystem.PCIE,
    "MPIO": Subsystem.PCIE,
    "MP0": Subsystem.FIRMWARE,
    "MP1": Subsystem.FIRMWARE,
    "SMN": Subsystem.FIRMWARE,
    "FUSE": Subsystem.FIRMWARE,
}


def _subsystem(block: str) -> Subsystem:
    return _BLOCK_SUBSYSTEM.get(block.upper(), Subsystem.COMPUTE)


def _cond(
    subsystem: Subsystem,
    reason: str,
    severity: Severity,
    *,
    code: str,
    message: str,
    action: Action = Action.NONE,
    count: int = 1,
) -> HealthCondition:
    return HealthCondition(
        subsystem=subsystem,
        reason=reason,
        severity=severity,
        action=action,
        vendor_code=code,
        message=message,
        count=max(count, 1),
    )


def _ecc_conditions(r: GpuReading, vendor: str) -> list[HealthCondition]:
    out: list[HealthCondition] = []
    blocks = {k: v for k, v in r.ecc_blocks.items() if k.upper() != "TOTAL"}
    for block, count in sorted(blocks.items()):
        sub = _subsystem(block)
        tag = block.upper()
        if count.uncorrectable:
            out.append(
                _cond(
                    sub,
                    "UncorrectableEccError",
                    Severity.CRITICAL,
                    code=f"{vendor}.ras:{tag}/ue",
                    message=f"{count.uncorrectable} uncorrectable errors in RAS block {tag}",
                    action=Action.DRAIN_AND_RESET,
                    count=count.uncorrectable,
                )
            )
        if count.deferred:
            out.append(
                _cond(
                    sub,
                    "DeferredEccError",
                    Severity.WARNING,
                    code=f"{vendor}.ras:{tag}/de",
                    message=f"{count.deferred} deferred errors in RAS block {tag}",
                    count=count.deferred,
                )
            )
        if count.correctable:
            out.append(
                _cond(
                    sub,
                    "CorrectableEccErrors",
                    Severity.INFO,
                    code=f"{vendor}.ras:{tag}/ce",
                    message=f"{count.correctable} correctable errors in RAS block {tag}",
                    count=count.correctable,
                )
            )
    total = r.ecc_total
    if total is not None and not blocks:
        # Only the device total is known: report it once, without a block.
        if total.uncorrectable:
            out.append(
                _cond(
                    Subsystem.MEMORY,
                    "UncorrectableEccError",
                    Severity.CRITICAL,
                    code=f"{vendor}.ecc:uncorrectable",
                    message=f"{total.uncorrectable} uncorrectable ECC errors",
                    action=Action.DRAIN_AND_RESET,
                    count=total.uncorrectable,
                )
            )
        if total.deferred:
            out.append(
                _cond(
                    Subsystem.MEMORY,
                    "DeferredEccError",
                    Severity.WARNING,
                    code=f"{vendor}.ecc:deferred",
                    message=f"{total.deferred} deferred ECC errors",
                    count=total.deferred,
                )
            )
        if total.correctable:
            out.append(
                _cond(
                    Subsystem.MEMORY,
                    "CorrectableEccErrors",
                    Severity.INFO,
                    code=f"{vendor}.ecc:correctable",
                    message=f"{total.correctable} correctable ECC errors",
                    count=total.correctable,
                )
            )
    return out


def _ras_state_conditions(r: GpuReading, vendor: str) -> list[HealthCondition]:
    out: list[HealthCondition] = []
    for block, state in sorted(r.ras_states.items()):
        tag, st = block.upper(), state.upper()
        sub = _subsystem(block)
        if st == "MULT_UC":
            out.append(
                _cond(
                    sub,
                    "RasUncorrectable",
                    Severity.CRITICAL,
                    code=f"{vendor}.ras:{tag}/MULT_UC",
                    message=f"RAS block {tag} reports multiple uncorrectable errors",
                    action=Action.DRAIN_AND_RESET,
                )
            )
        elif st == "POISON":
            out.append(
                _cond(
                    sub,
                    "RasPoison",
                    Severity.ERROR,
                    code=f"{vendor}.ras:{tag}/POISON",
                    message=f"RAS block {tag} consumed poisoned data",
                    action=Action.RESTART_APP,
                )
            )
        elif st == "PARITY":
            out.append(
                _cond(
                    sub,
                    "RasParityError",
                    Severity.WARNING,
                    code=f"{vendor}.ras:{tag}/PARITY",
                    message=f"RAS block {tag} reports a parity error",
                )
            )
    return out


def _bad_page_conditions(r: GpuReading, vendor: str) -> list[HealthCondition]:
    out: list[HealthCondition] = []
    pages = r.bad_pages or ()
    if not pages:
        return out
    pending = sum(1 for p in pages if p.status == "pending")
    unreservable = sum(1 for p in pages if p.status == "unreservable")
    threshold = r.bad_page_threshold
    if threshold is not None and threshold > 0 and len(pages) >= threshold:
        out.append(
            _cond(
                Subsystem.MEMORY,
                "BadPageThresholdExceeded",
                Severity.CRITICAL,
                code=f"{vendor}.badpages:threshold",
                message=f"{len(pages)} retired pages reach the bad-page threshold of {threshold}",
                action=Action.REPLACE_HARDWARE,
                count=len(pages),
            )
        )
    if unreservable:
        out.append(
            _cond(
                Subsystem.MEMORY,
                "BadPageUnreservable",
                Severity.ERROR,
                code=f"{vendor}.badpages:unreservable",
                message=f"{unreservable} bad pages could not be reserved",
                action=Action.DRAIN_AND_RESET,
                count=unreservable,
            )
        )
    if pending:
        out.append(
            _cond(
                Subsystem.MEMORY,
                "RetiredPagePending",
                Severity.WARNING,
                code=f"{vendor}.badpages:pending",
                message=f"{pending} bad pages are pending retirement until the next reset",
                action=Action.RESET_DEVICE,
                count=pending,
            )
        )
    return out


def _xgmi_conditions(r: GpuReading, vendor: str) -> list[HealthCondition]:
    out: list[HealthCondition] = []
    if r.xgmi_error_status == 2:
        out.append(
            _cond(
                Subsystem.INTERCONNECT,
                "XgmiErrors",
                Severity.ERROR,
                code=f"{vendor}.xgmi:2",
                message="xGMI reports multiple errors",
                action=Action.DRAIN_P2P,
            )
        )
    elif r.xgmi_error_status == 1:
        out.append(
            _cond(
                Subsystem.INTERCONNECT,
                "XgmiErrors",
                Severity.WARNING,
                code=f"{vendor}.xgmi:1",
                message="xGMI reports an error",
            )
        )
    down = [i for i, s in enumerate(r.xgmi_link_status or ()) if s.upper() == "D"]
    if down:
        out.append(
            _cond(
                Subsystem.INTERCONNECT,
                "XgmiLinkDown",
                Severity.ERROR,
                code=f"{vendor}.xgmi:link-down",
                message=f"xGMI link(s) {', '.join(map(str, down))} down",
                action=Action.DRAIN_P2P,
                count=len(down),
            )
        )
    return out


_THROTTLE = {
    "thermal": (Subsystem.THERMAL, "ThermalThrottle", Action.CHECK_COOLING),
    "hbm_thermal": (Subsystem.THERMAL, "MemoryThermalThrottle", Action.CHECK_COOLING),
    "vr_thermal": (Subsystem.THERMAL, "VoltageRegulatorThermalThrottle", Action.CHECK_COOLING),
    "prochot": (Subsystem.THERMAL, "ProcHotThrottle", Action.CHECK_COOLING),
    "power": (Subsystem.POWER, "PowerCapThrottle", Action.NONE),
}


def _throttle_conditions(r: GpuReading, vendor: str) -> list[HealthCondition]:
    out: list[HealthCondition] = []
    for reason in r.throttle_reasons or ():
        sub, name, action = _THROTTLE.get(reason, (Subsystem.POWER, "ClockThrottle", Action.NONE))
        out.append(
            _cond(
                sub,
                name,
                Severity.WARNING,
                code=f"{vendor}.throttle:{reason}",
                message=f"clocks throttled ({reason})",
                action=action,
            )
        )
    return out


def conditions_for(r: GpuReading, vendor: str = "amd") -> tuple[HealthCondition, ...]:
    """All health conditions one reading implies; ``vendor`` prefixes the vendor codes."""
    return tuple(
        _ecc_conditions(r, vendor)
        + _ras_state_conditions(r, vendor)
        + _bad_page_conditions(r, vendor)
        + _xgmi_conditions(r, vendor)
        + _throttle_conditions(r, vendor)
    )


def health_monitored(r: GpuReading) -> bool:
    """Whether any health signal was read (ECC, RAS, bad pages, xGMI, throttle)."""
    return any(
        (
            r.ecc_total is not None,
            bool(r.ecc_blocks),
            bool(r.ras_states),
            r.bad_pages is not None,
            r.xgmi_error_status is not None,
            r.throttle_reasons is not None,
            r.ecc_enabled is False,
        )
    )
