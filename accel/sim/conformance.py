"""Scenarios the accel conformance kit certifies the simulator on (``CONFORMANCE_SCENARIOS``).

The kit finds this module next to the ``sim`` entry point (``accel.sim``), as it finds every
plugin's ``conformance`` module; the simulator gets no special treatment.

Each profile becomes a scenario with everything the suite can use, all derived from the raw
profile JSON rather than from the simulator's code path, so they are independent checks:

* a fake sysfs laid out from the profile's bus ids, bridge paths and NUMA nodes (the core's
  PCIe levels are compared against it);
* an oracle: the profile's bus ids and per-device memory totals;
* a counting (empty) replay runner, so ``probe()`` is seen to run no tool;
* ``faulted_config``: the simulator's ``faults`` option (``device_lost:N``,
  ``not_supported:N=health``).

Imported only by the kit (it needs pytest through :mod:`accel.conformance`), never by
``accel.sim`` itself.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from accel.conformance import Fault, Oracle, Scenario
from accel.model import Device
from accel.plugin import BackendConfig
from accel.testing import FakeSysfs
from accel.tools import ReplayRunner

__all__ = ["CONFORMANCE_SCENARIOS", "ProfileOracle", "sim_scenarios"]


#: Deviations of the simulator this kit found, as strict xfails: when the simulator is fixed the
#: row passes, the run fails with "unexpectedly passed ... remove the entry", and the entry goes.
_KNOWN: dict[str, dict[str, str]] = {}


def _profiles() -> dict[str, dict[str, Any]]:
    try:
        folder = resources.files("accel.sim").joinpath("profiles")
        files = [p for p in folder.iterdir() if p.name.endswith(".json")]
    except (ModuleNotFoundError, FileNotFoundError, NotADirectoryError):
        return {}
    out = {}
    for path in sorted(files, key=lambda p: p.name):
        data = json.loads(path.read_text(encoding="utf-8"))
        out[str(data.get("name") or path.name.removesuffix(".json"))] = data
    return out


def _devices(profile: dict[str, Any]) -> list[dict[str, Any]]:
    """Profile devices merged over their templates (only the keys this module reads)."""
    templates = profile.get("templates", {})
    merged = []
    for dev in profile.get("devices", []):
        base = dict(templates.get(dev.get("template", ""), {}))
        base.update(dev)
        merged.append(base)
    return merged


class ProfileOracle(Oracle):
    """Bus ids and memory totals read straight from a simulator profile file."""

    def __init__(self, profile: dict[str, Any]) -> None:
        self._devices = _devices(profile)

    def pci_bus_ids(self) -> frozenset[str] | None:
        ids = frozenset(str(d["bus_id"]) for d in self._devices if d.get("bus_id"))
        return ids or None

    def memory_total_bytes(self, device: Device) -> int | None:
        for dev in self._devices:
            same_bus = device.pci is not None and dev.get("bus_id") == device.pci.bus_id
            if same_bus or (dev.get("uuid") and dev.get("uuid") == device.uuid):
                regions = [r for r in dev.get("memory", []) if r.get("kind") != "ddr"] or dev.get("memory", [])
                totals = [r.get("total_bytes") for r in regions]
                return sum(totals) if totals and None not in totals else None
        return None


def _sysfs(tmp_path: Path, profile: dict[str, Any]) -> Path:
    root = tmp_path / "sys"
    sysfs = FakeSysfs(root)
    for node in profile.get("host", {}).get("numa_nodes", []):
        if node.get("cpuset"):
            sysfs.add_numa_node(int(node["id"]), str(node["cpuset"]))
    for dev in _devices(profile):
        bus = dev.get("bus_id")
        if not bus or dev.get("bridge_path") is None:
            continue
        pci = dev.get("pci", {})
        sysfs.add_device(str(bus), vendor=str(pci.get("vendor_id") or "ffff"),
                         device=str(pci.get("device_id") or "0000"),
                         bridges=list(dev["bridge_path"]), pcie_root=dev.get("pcie_root"),
                         numa_node=int(dev["numa_node"]) if dev.get("numa_node") is not None else -1,
                         cpulist=dev.get("cpu_affinity"))
    return root


def _scenario(name: str, profile: dict[str, Any]) -> Scenario:
    def config(tmp_path: Path, faults: str | None = None) -> BackendConfig:
        options: dict[str, Any] = {"profile": name}
        if faults:
            options["faults"] = faults
        return BackendConfig(options=options, sysfs_root=_sysfs(tmp_path, profile), dev_root=tmp_path / "dev",
                             runner=ReplayRunner.from_mapping({}))

    def faulted(tmp_path: Path, fault: Fault, position: int) -> BackendConfig | None:
        spec = {Fault.DEVICE_LOST: f"device_lost:{position}",
                Fault.HEALTH_NOT_SUPPORTED: f"not_supported:{position}=health"}.get(fault)
        return config(tmp_path, spec) if spec else None

    return Scenario(name=name, config=config, oracle=ProfileOracle(profile), faulted_config=faulted,
                    xfail={**_KNOWN.get("*", {}), **_KNOWN.get(name, {})},
                    description=str(profile.get("description") or f"simulator profile {name}"))


def sim_scenarios() -> dict[str, Scenario]:
    """One scenario per built-in simulator profile."""
    return {name: _scenario(name, prof) for name, prof in _profiles().items()}


CONFORMANCE_SCENARIOS = sim_scenarios()
