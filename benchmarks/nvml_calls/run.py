"""NVML calls per snapshot: the accel NVIDIA backend against a naive per-field baseline.

Runs against the fake NVML (no hardware needed); the fake counts every wrapper call.  For each
scenario it prints the calls of one cold inventory() (first snapshot: identity, NVLink wiring,
MIG profiles and pair topology are read and cached), one warm inventory(), one telemetry() and one
health(), and the calls a naive reader makes for the same fields: one NVML call per field, no
field-values batching, no caching, nvmlInit/nvmlShutdown per snapshot (what a script built on the
per-field wrappers does).

``--compare`` instead runs gpustat and nvitop (when installed; they are not dependencies of accel)
next to the backend in this process, on fresh fakes of the same scenario, and prints calls for the
common field set and for everything each tool collects, with ratios (compare.py has the method).

    python benchmarks/nvml_calls/run.py [--scenario h100-nvswitch-8 ...] [--json] [--compare]
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


COMPARE_COLS = ("scenario", "gpus", "field set", "gpustat", "nvitop cold", "nvitop warm", "accel cold",
                "accel warm", "gpustat/accel", "nvitop/accel")


def _ratio(a: int, b: int) -> str:
    return f"{a / b:.2f}x" if b else "-"


def compare_rows(scenarios: list[str]) -> list[dict[str, Any]] | None:
    """Rows of the --compare table, or ``None`` (after a one-line note) when no tool is installed."""
    from compare import available_tools, measure_scenario  # this folder; run as a script

    tools = available_tools()
    missing = [name for name, version in tools.items() if version is None]
    if len(missing) == len(tools):
        print("compare: skipped (neither gpustat nor nvitop is installed; pip install gpustat nvitop)")
        return None
    if missing:
        print(f"compare: {', '.join(missing)} not installed; its columns show '-'")
    rows = []
    for sc in scenarios:
        m = measure_scenario(sc, tools)
        m["tools"] = tools
        rows.append(m)
    return rows


def print_compare(rows: list[dict[str, Any]]) -> None:
    tools = rows[0]["tools"]
    print("NVML calls per snapshot (fake NVML; " + ", ".join(
        f"{n} {v}" for n, v in tools.items() if v) + "); ratios are tool / accel, warm")
    table = [COMPARE_COLS]
    for r in rows:
        acc, gs, nt = r["accel"], r.get("gpustat"), r.get("nvitop")
        for key, label in (("common", "common"), ("all", "all")):
            g = gs[f"{key}_warm"] if gs else None
            nw = nt[f"{key}_warm"] if nt else None
            aw = acc[f"{key}_warm"]
            table.append((r["scenario"], str(acc["gpus"]), label, "-" if g is None else str(g),
                          "-" if nt is None else str(nt[f"{key}_cold"]), "-" if nw is None else str(nw),
                          str(acc[f"{key}_cold"]), str(aw), "-" if g is None else _ratio(g, aw),
                          "-" if nw is None else _ratio(nw, aw)))
    widths = [max(len(row[i]) for row in table) for i in range(len(COMPARE_COLS))]
    for row in table:
        print("  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)))
    lacking = sorted({fn for r in rows for t in ("accel", "gpustat", "nvitop") if t in r
                      for fn in r[t]["fake_lacks"]})
    if lacking:
        print("note: the fake answered FunctionNotFound for symbols a real driver has: " + ", ".join(lacking))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", action="append",
                        default=None, help="fake NVML scenario (repeatable); default: a representative set")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--compare", action="store_true",
                        help="measure gpustat and nvitop (if installed) against the backend in this run")
    args = parser.parse_args()
    scenarios = args.scenario or ["h100-nvswitch-8", "rtx4090-4", "a100-mig", "old-driver-r470"]
    if args.compare:
        compared = compare_rows(scenarios)
        if compared is None:
            return
        if args.json:
            print(json.dumps(compared, indent=2))
        else:
            print_compare(compared)
        return
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
