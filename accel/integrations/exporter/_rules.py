"""Prometheus alerting and recording rules over the exporter's families (``accel exporter rules``).

The rules are data (:data:`RULE_GROUPS`); :func:`rules_yaml` writes them as a Prometheus rule
file.  Thresholds are the defaults documented in ``docs/exporter.md``; edit the emitted file to
change them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["MEMORY_FULL_RATIO", "RULE_GROUPS", "THERMAL_MARGIN_CELSIUS", "rules_yaml"]

#: Used / total memory above which ``AccelMemoryNearlyFull`` fires (after 5 minutes).
MEMORY_FULL_RATIO = 0.95
#: ``AccelThermalNearSlowdown`` fires this many degrees below the device's slowdown threshold.
THERMAL_MARGIN_CELSIUS = 5

_RECORDING: list[dict[str, Any]] = [
    {
        "record": "device:accel_memory_used:ratio",
        "expr": "accel_memory_used_bytes / accel_memory_total_bytes",
    },
    {
        "record": "device:accel_temperature_slowdown_headroom:celsius",
        "expr": 'accel_temperature_limit_celsius{limit="slowdown"} - ignoring(limit) accel_temperature_celsius',
    },
    {
        "record": "instance:accel_devices_unhealthy:sum",
        "expr": 'sum by (instance, job) (accel_health_state{state="unhealthy"})',
    },
]

_ALERTS: list[dict[str, Any]] = [
    {
        # No `for`: the state is derived from a critical or fatal condition (an uncorrectable ECC
        # error, a lost device); there is no noise to wait out.
        "alert": "AccelDeviceUnhealthy",
        "expr": 'accel_health_state{state="unhealthy"} == 1',
        "labels": {"severity": "critical"},
        "annotations": {
            "summary": "Accelerator {{ $labels.device }} on {{ $labels.instance }} is unhealthy",
            "description": "accel reports the device unhealthy; "
            "accel_health_condition{device=\"{{ $labels.device }}\"} names the reason and the "
            "vendor code (accel health shows the recommended action).",
        },
    },
    {
        "alert": "AccelDeviceLost",
        "expr": 'accel_operational_state{state="lost"} == 1',
        "labels": {"severity": "critical"},
        "annotations": {
            "summary": "Accelerator {{ $labels.device }} on {{ $labels.instance }} is lost",
            "description": "The device fell off the bus or stopped answering its driver; it usually needs a reset "
            "or a reboot of the node.",
        },
    },
    {
        "alert": "AccelDeviceMissing",
        "expr": "max_over_time(accel_device_info[1h]) unless on (instance, job, device) accel_device_info "
        "and on (instance, job, backend) (accel_exporter_backend_up == 1)",
        "for": "5m",
        "labels": {"severity": "critical"},
        "annotations": {
            "summary": "Accelerator {{ $labels.device }} disappeared from {{ $labels.instance }}",
            "description": "The device was listed within the last hour and its backend still answers, but the "
            "device is no longer listed.",
        },
    },
    {
        "alert": "AccelUncorrectableECCErrors",
        "expr": "increase(accel_ecc_uncorrected_total[10m]) > 0",
        "labels": {"severity": "critical"},
        "annotations": {
            "summary": "Uncorrectable ECC errors on {{ $labels.device }} ({{ $labels.instance }})",
            "description": "The uncorrected ECC error counter grew by {{ $value }} in the last 10 minutes.",
        },
    },
    {
        "alert": "AccelMemoryNearlyFull",
        "expr": f"accel_memory_used_bytes / accel_memory_total_bytes > {MEMORY_FULL_RATIO}",
        "for": "5m",
        "labels": {"severity": "warning"},
        "annotations": {
            "summary": "Device memory of {{ $labels.device }} on {{ $labels.instance }} is nearly full",
            "description": "{{ $value | humanizePercentage }} of the device memory is in use; the next allocation "
            "may fail with out-of-memory.",
        },
    },
    {
        "alert": "AccelThermalNearSlowdown",
        "expr": "accel_temperature_celsius >= ignoring(limit) "
        f'(accel_temperature_limit_celsius{{limit="slowdown"}} - {THERMAL_MARGIN_CELSIUS})',
        "for": "5m",
        "labels": {"severity": "warning"},
        "annotations": {
            "summary": "{{ $labels.device }} on {{ $labels.instance }} is near its thermal slowdown threshold",
            "description": "The device runs at {{ $value }} C, within "
            f"{THERMAL_MARGIN_CELSIUS} C of the slowdown threshold it reports; check cooling. Devices that "
            "report no slowdown threshold are not covered by this rule.",
        },
    },
    {
        "alert": "AccelDeviceDegraded",
        "expr": 'accel_health_state{state="degraded"} == 1',
        "for": "10m",
        "labels": {"severity": "warning"},
        "annotations": {
            "summary": "Accelerator {{ $labels.device }} on {{ $labels.instance }} is degraded",
            "description": "An error-level condition, or a pending reset, has been active for 10 minutes; "
            "see accel_health_condition.",
        },
    },
    {
        "alert": "AccelBackendDown",
        "expr": "accel_exporter_backend_up == 0",
        "for": "2m",
        "labels": {"severity": "warning"},
        "annotations": {
            "summary": "accel backend {{ $labels.backend }} on {{ $labels.instance }} does not answer",
            "description": "The backend failed or timed out on every scrape for 2 minutes; its devices are missing "
            "from the export. A backend that passed its call deadline is not called again until the exporter "
            "restarts.",
        },
    },
    {
        "alert": "AccelMemoryLeakSuspected",
        "expr": "min by (instance, device, pid) (accel_memory_leak_seconds_to_full)",
        # 1m, not 5m: the detector already waits for a whole window of evidence and holds its
        # verdict (hysteresis), and a leak that fills the device in ten minutes must alert before
        # it does (tests/leak/test_alert_before_full.py; docs/leaks.md)
        "for": "1m",
        "labels": {"severity": "warning"},
        "annotations": {
            "summary": "memory leak suspected on {{ $labels.device }} ({{ $labels.instance }}"
            "{{ if $labels.pid }}, pid {{ $labels.pid }}{{ end }})",
            "description": "The floor of used device memory has kept rising (allocator caching, garbage-collection "
            "sawtooth and model-load steps are told apart; docs/leaks.md). At this rate the device is full in "
            "{{ $value | humanizeDuration }}.",
        },
    },
    {
        "alert": "AccelInventoryIncomplete",
        "expr": "accel_inventory_complete == 0",
        "for": "15m",
        "labels": {"severity": "warning"},
        "annotations": {
            "summary": "accel on {{ $labels.instance }} cannot read part of the device picture",
            "description": "accel_inventory_problems says which backend and what kind; `accel ls` prints one "
            "warning per problem.",
        },
    },
    # Partial reads per device and attribution sources (issue 32); kept apart from the rules above.
    {
        "alert": "AccelDeviceReadProblems",
        "expr": "accel_device_read_problems > 0",
        "for": "15m",
        "labels": {"severity": "warning"},
        "annotations": {
            "summary": "accel cannot read part of {{ $labels.device }} on {{ $labels.instance }} ({{ $labels.kind }})",
            "description": "{{ $value }} {{ $labels.kind }} problem(s) of backend {{ $labels.backend }} name this "
            "device (a record of the vendor tool's output that did not parse, a field that could not be read); "
            "its health is unknown. `accel ls` prints each problem.",
        },
    },
    {
        "alert": "AccelAttributionUnavailable",
        "expr": "accel_attribution_up == 0",
        "for": "10m",
        "labels": {"severity": "warning"},
        "annotations": {
            "summary": "accel on {{ $labels.instance }} cannot say who uses its devices ({{ $labels.source }})",
            "description": "The {{ $labels.source }} source did not answer; devices carry no pod or job "
            "attribution until it does (check the kubelet's PodResources socket or the job-mapping directory).",
        },
    },
]

#: The rule file's groups: recording rules first, then the alerts.
RULE_GROUPS: tuple[Mapping[str, Any], ...] = (
    {"name": "accel.recording", "rules": _RECORDING},
    {"name": "accel.alerts", "rules": _ALERTS},
)


def _scalar(value: Any) -> str:
    # JSON strings are valid YAML double-quoted scalars; numbers and names print as themselves.
    return json.dumps(value) if isinstance(value, str) else str(value)


def _rule(rule: Mapping[str, Any], indent: str) -> list[str]:
    lines: list[str] = []
    first = True
    for key in ("record", "alert", "expr", "for", "labels", "annotations"):
        if key not in rule:
            continue
        lead = f"{indent}- " if first else f"{indent}  "
        first = False
        value = rule[key]
        if isinstance(value, Mapping):
            lines.append(f"{lead}{key}:")
            lines.extend(f"{indent}    {k}: {_scalar(v)}" for k, v in value.items())
        else:
            lines.append(f"{lead}{key}: {_scalar(value)}")
    return lines


def rules_yaml(groups: Sequence[Mapping[str, Any]] = RULE_GROUPS) -> str:
    """The rule file (Prometheus ``rule_files`` format) as YAML text."""
    out = [
        "# Prometheus rules for accel exporter (generated by `accel exporter rules`).",
        "groups:",
    ]
    for group in groups:
        out.append(f"  - name: {_scalar(group['name'])}")
        out.append("    rules:")
        for rule in group["rules"]:
            out.extend(_rule(rule, "      "))
    return "\n".join(out) + "\n"
