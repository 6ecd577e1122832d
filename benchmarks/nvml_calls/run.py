"""NVML calls per snapshot: the accel NVIDIA backend against a naive per-field baseline.

Runs against the fake NVML (no hardware needed); the fake counts every wrapper call.  For each
scenario it prints the calls of one cold inventory() (first snapshot: identity, NVLink wiring,
MIG profiles and pair topology are read and cached), one warm inventory(), one telemetry() and one
health(), and the calls a naive reader makes for the same fields: one NVML call per field, no
field-values batching, no caching, nvmlInit/nvmlShutdown per snapshot (what a script built on the
per-field wrappers does; gpustat and nvitop are discussed in README.md).

    python benchmarks/nvml_calls/run.py [--scenario h100-nvswitch-8 ...] [--json]
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from accel.plugin import BackendConfig
from accel.plugins.nvidia import PLUGIN
from accel.plugins.nvidia._nvml import Nvml
from accel.plugins.nvidia.testing import FakeNVML

FIELDS_PER_DEVICE = (
    # (wrapper, extra args) for the fields accel reports, one call each in the naive reader.
    ("nvmlDeviceGetName", ()), ("nvmlDeviceGetUUID", ()), ("nvmlDeviceGetSerial", ()),
    ("nvmlDeviceGetPciInfo", ()), ("nvmlDeviceGetArchitecture", ()), ("nvmlDeviceGetCudaComputeCapability", ()),
    ("nvmlDeviceGetBrand", ()), ("nvmlDeviceGetMinorNumber", ()), ("nvmlDeviceGetVbiosVersion", ()),
    ("nvmlDeviceGetInforomImageVersion", ()), ("nvmlDeviceGetPersistenceMode", ()),
    ("nvmlDeviceGetMemoryInfo", ()), ("nvmlDeviceGetBAR1MemoryInfo", ()),
    ("nvmlDeviceGetPowerManagementDefaultLimit", ()), ("nvmlDeviceGetPowerManagementLimitConstraints", ()),
    ("nvmlDeviceGetEnforcedPowerLimit", ()), ("nvmlDeviceGetTemperatureThreshold", (0,)),
    ("nvmlDeviceGetTemperatureThreshold", (1,)), ("nvmlDeviceGetTemperatureThreshold", (3,)),
    ("nvmlDeviceGetMaxClockInfo", (1,)), ("nvmlDeviceGetMaxClockInfo", (2,)),
    ("nvmlDeviceGetMaxPcieLinkGeneration", ()), ("nvmlDeviceGetMaxPcieLinkWidth", ()),
    ("nvmlDeviceGetCurrPcieLinkGeneration", ()), ("nvmlDeviceGetCurrPcieLinkWidth", ()),
    ("nvmlDeviceGetMemoryAffinity", (1, 0)), ("nvmlDeviceGetCpuAffinity", (4,)),
    ("nvmlDeviceGetEccMode", ()), ("nvmlDeviceGetMigMode", ()),
    ("nvmlDeviceGetTotalEccErrors", (0, 0)), ("nvmlDeviceGetTotalEccErrors", (1, 0)),
    ("nvmlDeviceGetTotalEccErrors", (0, 1)), ("nvmlDeviceGetTotalEccErrors", (1, 1)),
    ("nvmlDeviceGetRetiredPages", (0,)), ("nvmlDeviceGetRetiredPages", (1,)),
    ("nvmlDeviceGetRetiredPagesPendingStatus", ()), ("nvmlDeviceGetRemappedRows", ()),
    ("nvmlDeviceGetUtilizationRates", ()), ("nvmlDeviceGetPowerUsage", ()),
    ("nvmlDeviceGetTotalEnergyConsumption", ()), ("nvmlDeviceGetTemperature", (0,)),
    ("nvmlDeviceGetFanSpeed", ()), ("nvmlDeviceGetClockInfo", (0,)), ("nvmlDeviceGetClockInfo", (1,)),
    ("nvmlDeviceGetClockInfo", (2,)), ("nvmlDeviceGetClockInfo", (3,)),
    ("nvmlDeviceGetCurrentClocksThrottleReasons", ()), ("nvmlDeviceGetPcieThroughput", (0,)),
    ("nvmlDeviceGetPcieThroughput", (1,)), ("nvmlDeviceGetPcieReplayCounter", ()),
    ("nvmlDeviceGetComputeRunningProcesses", ()), ("nvmlDeviceGetGraphicsRunningProcesses", ()),
)
PER_LINK = ("nvmlDeviceGetNvLinkState", "nvmlDeviceGetNvLinkVersion", "nvmlDeviceGetNvLinkRemotePciInfo",
            "nvmlDeviceGetNvLinkRemoteDeviceType")
PER_LINK_COUNTERS = (0, 1, 2)  # replay, recovery, CRC via nvmlDeviceGetNvLinkErrorCounter


def naive_snapshot(fake: FakeNVML) -> int:
    """Calls a per-field reader makes for the same snapshot (errors count as calls too)."""
    nv = Nvml(fake)
    before = nv.total_calls()
    nv.init()
    n = nv.call("nvmlDeviceGetCount")
    handles = [nv.call("nvmlDeviceGetHandleByIndex", i) for i in range(n)]

    def attempt(fn: str, *args: Any) -> Any:
        try:
            return nv.call(fn, *args)
        except Exception:  # noqa: BLE001 -- the baseline only counts; failures are calls too
            return None

    for h in handles:
        for fn, args in FIELDS_PER_DEVICE:
            attempt(fn, h, *args)
        for link in range(36):
            if attempt("nvmlDeviceGetNvLinkState", h, link) is None:
                break
            for fn in PER_LINK[1:]:
                attempt(fn, h, link)
            for counter in PER_LINK_COUNTERS:
                attempt("nvmlDeviceGetNvLinkErrorCounter", h, link, counter)
    for i in range(n):
        for j in range(i + 1, n):
            attempt("nvmlDeviceGetTopologyCommonAncestor", handles[i], handles[j])
            attempt("nvmlDeviceGetP2PStatus", handles[i], handles[j], 0)
    nv.shutdown()
    return nv.total_calls() - before


def measure(scenario: str) -> dict[str, Any]:
    fake = FakeNVML(scenario)
    backend = PLUGIN.open(BackendConfig(options={"scenario": scenario}))
    # The plugin builds its own fake for the option; count on the backend's session counter.
    n = len(backend.inventory().devices)
    row: dict[str, Any] = {"scenario": scenario, "gpus": n}
    backend.close()
    backend = PLUGIN.open(BackendConfig(options={"scenario": scenario}))
    c0 = backend.vendor_call_count
    backend.inventory()
    c1 = backend.vendor_call_count
    backend.inventory()
    c2 = backend.vendor_call_count
    backend.telemetry()
    c3 = backend.vendor_call_count
    backend.health()
    c4 = backend.vendor_call_count
    backend.close()
    row.update(open=c0, cold_inventory=c1 - c0, warm_inventory=c2 - c1, telemetry=c3 - c2, health=c4 - c3)
    row["naive_snapshot"] = naive_snapshot(fake)
    row["naive_over_warm"] = round(row["naive_snapshot"] / max(1, row["warm_inventory"]), 1)
    row["naive_over_cold"] = round(row["naive_snapshot"] / max(1, row["cold_inventory"]), 2)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", action="append",
                        default=None, help="fake NVML scenario (repeatable); default: a representative set")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    scenarios = args.scenario or ["h100-nvswitch-8", "rtx4090-4", "a100-mig", "old-driver-r470"]
    rows = [measure(s) for s in scenarios]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    cols = ["scenario", "gpus", "open", "cold_inventory", "warm_inventory", "telemetry", "health",
            "naive_snapshot", "naive_over_warm", "naive_over_cold"]
    print(" ".join(f"{c:>16}" for c in cols))
    for r in rows:
        print(" ".join(f"{r[c]!s:>16}" for c in cols))


if __name__ == "__main__":
    main()
