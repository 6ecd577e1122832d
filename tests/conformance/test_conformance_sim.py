"""The simulator passes every row in every profile; each injected fault fails the matching rows.

One child pytest session runs every profile's scenario (fake sysfs, profile oracle, fault
configs) and a set of dgx-h100 suites with a simulator fault switched on from the start.
"""

from __future__ import annotations

from typing import Any

import pytest

from accel.conformance import REQUIREMENTS, scenarios_for
from tests.conformance._kit import failing_rows, run_suite_module

#: simulator fault option -> the rows it must fail (a device that is lost from the first read
#: is missing from telemetry and has no memory reading; every other fault is a legal state).
FAULTS: dict[str, set[str]] = {
    "device_lost:0": {"telemetry.one-per-device", "memory.used-le-total"},
    "ecc_uncorrectable:1": set(),
    "thermal_throttle:2": set(),
    "memory_leak:3": set(),
    "not_supported:0=power_watts": set(),
    "not_supported:1=health": set(),
}


@pytest.fixture(scope="module")
def sim_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    lines = ["from accel.conformance import suite_for", ""]
    for name in sorted(scenarios_for("sim")):
        lines.append(f"Test_{name.replace('-', '_')} = suite_for('sim', {name!r})")
    for i, fault in enumerate(FAULTS):
        lines += [
            f"Fault{i} = suite_for('sim', 'dgx-h100', options={{'faults': {fault!r}}})",
            f"Fault{i}.scenario = {('fault ' + fault)!r}",
            f"TestFault{i} = Fault{i}",
        ]
    _rc, output, results = run_suite_module(tmp_path_factory.mktemp("sim"), "\n".join(lines) + "\n")
    assert results is not None, output[-3000:]
    return {run["scenario"]: run for run in results["runs"]}


def test_every_profile_is_a_scenario() -> None:
    assert {
        "dgx-h100",
        "a100-mig",
        "mi300x-8",
        "ascend-910b-8",
        "mlu370-x8",
        "rtx4090-4",
        "mixed-nvidia-ascend",
    } <= set(scenarios_for("sim"))


@pytest.mark.parametrize("profile", sorted(scenarios_for("sim")))
def test_sim_passes_every_row(profile: str, sim_runs: dict[str, dict[str, Any]]) -> None:
    run = sim_runs[profile]
    assert len(run["rows"]) == len(REQUIREMENTS)
    # Known simulator deviations are strict xfails (they fail the run once fixed); nothing else
    # may be anything but a pass: no skip, no N/A.
    bad = {rid: (r["status"], r["message"]) for rid, r in run["rows"].items() if r["status"] not in ("pass", "xfail")}
    if profile == "a100-mig":  # one GPU: the pairwise PCIe row has no pair to compare and skips, saying so
        skipped = bad.pop("topology.pcie-levels-match-sysfs", ("skip", ""))
        assert skipped[0] == "skip" and "fewer than two devices" in skipped[1]
    assert not bad


def test_sim_rows_use_the_oracle_sysfs_and_fault_configs(sim_runs: dict[str, dict[str, Any]]) -> None:
    rows = sim_runs["dgx-h100"]["rows"]
    for rid in (
        "memory.oracle-1pct",
        "inventory.oracle-devices",
        "topology.pcie-levels-match-sysfs",
        "health.lost-device-isolated",
        "health.not-supported-unknown",
        "discovery.probe-cheap",
    ):
        assert rows[rid]["status"] == "pass", rid
    assert rows["memory.oracle-1pct"]["measured"] == "8 devices compared"
    assert rows["discovery.probe-cheap"]["measured"] == "0 tool runs per probe"


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_injected_fault_fails_the_matching_rows(fault: str, sim_runs: dict[str, dict[str, Any]]) -> None:
    run = sim_runs[f"fault {fault}"]
    assert failing_rows(run) == FAULTS[fault]


def test_lost_device_message_names_the_device(sim_runs: dict[str, dict[str, Any]]) -> None:
    rows = sim_runs["fault device_lost:0"]["rows"]
    msg = rows["memory.used-le-total"]["message"]
    assert msg.startswith("nvidia:GPU-7b1e0c00-1d2a-4c3b-9e4f-000000000000: memory used unknown")
    assert "Fix:" in msg
    assert "telemetry() answered for" in rows["telemetry.one-per-device"]["message"]
