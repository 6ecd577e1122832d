"""Conformance rows of section ``inventory`` (Inventory): The device snapshot: identity, model, versions, binding."""

from __future__ import annotations

import re

import pytest

from accel.model import HostInventory, device_id_for
from accel.plugin import ProbeStatus
from accel.sysfs import pci_function

from .._requirements import row
from ._base import SuiteBase
from ._harness import _Harness
from ._helpers import _DEVICE_FIELDS, _PLACEHOLDER_MODELS, _VERSION, _check, _device_ids, _empty, _fail, _get_path

__all__ = ["InventoryRows"]


class InventoryRows(SuiteBase):
    """The ``inventory.*`` rows of requirements.json."""

    @row("inventory.schema-valid")
    def test_inventory_schema_valid(self, accel: _Harness) -> None:
        inv = accel.inventory
        if not isinstance(inv, HostInventory):
            _fail([f"inventory() returned {type(inv).__name__}"], "return accel.model.HostInventory")
        try:
            again = HostInventory.model_validate_json(inv.model_dump_json())
        except Exception as exc:  # noqa: BLE001
            _fail([f"the inventory does not validate after a JSON round trip: {exc}"],
                  "build models through their constructors (model_copy(update=...) skips validation)")
        if again != inv:
            _fail(["the inventory changes in a JSON round trip"], "use only JSON-representable values")

    @row("inventory.devices-present")
    def test_inventory_devices_present(self, accel: _Harness) -> None:
        probe = accel.probe()
        inv = accel.inventory
        problems = []
        if probe.status is not ProbeStatus.PRESENT:
            problems.append(f"probe() on the configured host says {probe.status.value}: {probe.reason!r}")
        if not inv.devices:
            problems.append("inventory() lists no devices")
        if probe.device_count is not None and probe.device_count != len(inv.devices):
            problems.append(f"probe() counted {probe.device_count} devices, inventory() lists {len(inv.devices)}")
        _check(problems, "run the suite on the hardware or a recorded scenario, and count the same devices")

    @row("inventory.ids-stable")
    def test_inventory_ids_stable(self, accel: _Harness) -> None:
        first = _device_ids(accel.inventory)
        other = accel.open()
        second = _device_ids(accel.call("inventory() on a second backend", other.inventory))
        accel.call("close()", other.close)
        third_backend = accel.open()
        third = _device_ids(accel.call("inventory() after reopening", third_backend.inventory))
        problems = []
        for label, ids in (("a second open", second), ("a reopen", third)):
            if sorted(ids) != sorted(first):
                gone = sorted(set(first) - set(ids))
                new = sorted(set(ids) - set(first))
                problems.append(f"{label} changed the ids (gone {gone}, new {new})")
        _check(problems, "derive ids from the UUID or PCI bus id (accel.model.device_id_for), never from "
                         "enumeration order, time or randomness")

    @row("inventory.ids-unique")
    def test_inventory_ids_unique(self, accel: _Harness) -> None:
        inv = accel.inventory
        problems = []
        seen: dict[str, str] = {}
        for dev in inv.devices:
            if dev.id in seen:
                problems.append(f"device id {dev.id!r} appears twice")
            seen[dev.id] = "device"
            if dev.pci is not None:
                key = "pci:" + dev.pci.bus_id
                if key in seen:
                    problems.append(f"bus id {dev.pci.bus_id} is reported by two devices")
                seen[key] = dev.id
        for part in inv.partitions:
            if part.id in seen:
                problems.append(f"partition id {part.id!r} collides with another id")
            seen[part.id] = "partition"
        _check(problems, "one id per device and partition; one PCI function per device")

    @row("inventory.ids-canonical")
    def test_inventory_ids_canonical(self, accel: _Harness) -> None:
        problems = []
        for dev in accel.inventory.devices:
            if dev.uuid and not dev.uuid_synthesized:
                expected = device_id_for(dev.vendor, uuid=dev.uuid)
            elif dev.pci is not None:
                expected = device_id_for(dev.vendor, bus_id=dev.pci.bus_id)
            else:
                problems.append(f"{dev.id} has neither a real UUID nor a PCI bus id to derive a stable id from")
                continue
            if dev.id != expected and not dev.id.startswith(expected + "/"):
                problems.append(f"{dev.id!r} should be {expected!r}")
        _check(problems, "build ids with accel.model.device_id_for(vendor, uuid=..., bus_id=...)")

    @row("inventory.ids-match-pci")
    def test_inventory_ids_match_pci(self, accel: _Harness) -> None:
        inv = accel.inventory
        problems = []
        for dev in inv.devices:
            if dev.pci is None:
                problems.append(f"{dev.id} has no PCI info although the plugin declares 'pci'")
                continue
            fn = pci_function(dev.pci.bus_id, accel.config.sysfs_root)
            if fn is None:
                continue
            for name in ("vendor_id", "device_id"):
                mine, theirs = getattr(dev.pci, name), getattr(fn, name)
                if mine is not None and theirs is not None and mine != theirs:
                    problems.append(f"{dev.id}: pci.{name} is {mine} but sysfs says {theirs}")
        truth = self.oracle.pci_bus_ids() if self.oracle is not None else None
        if truth is not None:
            mine_ids = {d.pci.bus_id for d in inv.devices if d.pci is not None}
            if mine_ids != set(truth):
                problems.append(f"bus ids differ from the oracle: missing {sorted(set(truth) - mine_ids)}, "
                                f"extra {sorted(mine_ids - set(truth))}")
        _check(problems, "normalise bus ids with accel.model.normalize_bus_id and report every device")

    @row("inventory.oracle-devices")
    def test_inventory_oracle_devices(self, accel: _Harness) -> None:
        if self.oracle is None:
            pytest.skip("no oracle: set ConformanceSuite.oracle to an independent reading of the devices")
        inv = accel.inventory
        ids, bus = self.oracle.device_ids(), self.oracle.pci_bus_ids()
        if ids is None and bus is None:
            pytest.skip("the oracle reads neither device ids nor PCI bus ids")
        problems = []
        if ids is not None and set(ids) != set(_device_ids(inv)):
            problems.append(f"device ids differ from the oracle: missing {sorted(set(ids) - set(_device_ids(inv)))},"
                            f" extra {sorted(set(_device_ids(inv)) - set(ids))}")
        if bus is not None:
            mine = {d.pci.bus_id for d in inv.devices if d.pci is not None}
            if mine != set(bus):
                problems.append(f"{len(mine)} bus ids reported, the oracle sees {len(bus)}: missing "
                                f"{sorted(set(bus) - mine)}, extra {sorted(mine - set(bus))}")
        _check(problems, "report every device the host has, and only those")

    @row("inventory.model-vendor-filled")
    def test_inventory_model_vendor_filled(self, accel: _Harness) -> None:
        problems = []
        for dev in accel.inventory.devices:
            if not dev.model.strip() or _PLACEHOLDER_MODELS.match(dev.model.strip()):
                problems.append(f"{dev.id}: model {dev.model!r} is a placeholder")
            if not re.fullmatch(r"[a-z][a-z0-9_-]*", dev.vendor):
                problems.append(f"{dev.id}: vendor {dev.vendor!r} is not a lower-case id")
        _check(problems, "map the vendor's product name (or PCI device id) to the marketing model name")

    @row("inventory.versions-parse")
    def test_inventory_versions_parse(self, accel: _Harness) -> None:
        problems = []
        for dev in accel.inventory.devices:
            v = dev.versions
            if v.driver is None:
                problems.append(f"{dev.id}: no driver version")
            elif not _VERSION.match(v.driver):
                problems.append(f"{dev.id}: driver version {v.driver!r} does not start with a dotted number")
            if v.runtime is not None and not _VERSION.match(v.runtime):
                problems.append(f"{dev.id}: runtime version {v.runtime!r} does not start with a dotted number")
            for name, value in v.firmware.items():
                if not value.strip():
                    problems.append(f"{dev.id}: firmware {name!r} has an empty version")
        _check(problems, "report the version strings as the vendor prints them, trimmed (e.g. '550.54.15')")

    @row("inventory.binding-filled")
    def test_inventory_binding_filled(self, accel: _Harness) -> None:
        problems = []
        seen: dict[tuple[str, str], str] = {}
        for dev in accel.inventory.devices:
            b = dev.binding
            if not b.visible_env or b.visible_id is None:
                problems.append(f"{dev.id}: binding.visible_env/visible_id not set")
                continue
            key = (b.visible_env, b.visible_id)
            if key in seen:
                problems.append(f"{dev.id} and {seen[key]} are both {b.visible_env}={b.visible_id}")
            seen[key] = dev.id
        _check(problems, "set Binding(visible_env='CUDA_VISIBLE_DEVICES', visible_id=<uuid or index>)")

    @row("inventory.unsupported-declared")
    def test_inventory_unsupported_declared(self, accel: _Harness) -> None:
        info = accel.require_plugin().info
        devs = accel.inventory.devices
        problems = []
        for path, cap in _DEVICE_FIELDS.items():
            if cap is not None and not info.declares(cap):
                continue
            silent = [d for d in devs if _empty(_get_path(d, path)) and path not in d.unsupported]
            if devs and len(silent) == len(devs):
                owner = f"capability '{cap.value}' is declared" if cap else "it is a core field"
                problems.append(f"{path} is empty on every device although {owner}")
        _check(problems, "report the field, or name it in Device.unsupported (or drop the capability)")

    @row("inventory.sources")
    def test_inventory_sources(self, accel: _Harness) -> None:
        info = accel.require_plugin().info
        inv = accel.inventory
        name = accel.backend.name
        mine = [s for s in inv.sources if s.backend == name]
        if not mine:
            _fail([f"no SourceInfo with backend={name!r} (sources: {[s.backend for s in inv.sources]})"],
                  "add SourceInfo(backend=<name>, plugin_version=PluginInfo.version, api=...) to sources")
        if not any(s.plugin_version == info.version for s in mine):
            _fail([f"SourceInfo.plugin_version is {[s.plugin_version for s in mine]}, PluginInfo says "
                   f"{info.version!r}"], "report the plugin version in SourceInfo.plugin_version")
