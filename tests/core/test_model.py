"""The device model: units, unknowns, validation that names the field, the health rule."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from accel.errors import ValidationError
from accel.model import (
    Action,
    ConditionScope,
    Device,
    DistanceLevel,
    Domain,
    Health,
    HealthCondition,
    HealthState,
    Host,
    HostInventory,
    Link,
    MemoryRegion,
    Operational,
    Partition,
    PciInfo,
    Placement,
    Severity,
    Telemetry,
    derive_state,
    device_id_for,
    json_schema,
    normalize_bus_id,
    validate,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def dev(i: int, **kw: object) -> Device:
    data: dict[str, object] = {
        "id": f"nvidia:GPU-{i}",
        "vendor": "nvidia",
        "kind": "gpu",
        "model": "H100",
        "memory": [{"kind": "hbm", "total_bytes": 80 * 2**30}],
    }
    data.update(kw)
    return validate(Device, data)


def cond(sev: str, **kw: object) -> HealthCondition:
    return HealthCondition.model_validate({"subsystem": "memory", "reason": "Thing", "severity": sev, **kw})


class TestIds:
    def test_uuid_preferred_over_bus_id(self) -> None:
        assert device_id_for("nvidia", uuid="GPU-1", bus_id="0000:01:00.0") == "nvidia:GPU-1"
        assert device_id_for("huawei", bus_id="0000:c1:00.0") == "huawei:pci-0000:c1:00.0"

    def test_an_id_needs_something_stable(self) -> None:
        with pytest.raises(ValueError):
            device_id_for("huawei")

    def test_id_must_carry_its_vendor(self) -> None:
        with pytest.raises(ValidationError, match="must start with its vendor"):
            dev(0, id="amd:x")

    @pytest.mark.parametrize(
        ("raw", "canonical"),
        [
            ("00000000:3B:00.0", "0000:3b:00.0"),
            ("3b:00.0", "0000:3b:00.0"),
            (" 0000:C1:00.0 ", "0000:c1:00.0"),
            ("0001:01:1f.7", "0001:01:1f.7"),
        ],
    )
    def test_bus_ids_normalise(self, raw: str, canonical: str) -> None:
        assert normalize_bus_id(raw) == canonical

    @pytest.mark.parametrize("raw", ["", "N/A", "0000:3b:00", "1ffff:00:00.0", "zz:00.0"])
    def test_bad_bus_ids_are_typed_errors(self, raw: str) -> None:
        with pytest.raises(ValidationError, match=r"bus id|PCI"):
            normalize_bus_id(raw)

    def test_model_rejects_non_canonical_bus_id(self) -> None:
        with pytest.raises(ValidationError) as info:
            dev(0, pci={"bus_id": "0000:3B:00.0"})
        assert info.value.field == "pci.bus_id"


class TestValidationNamesTheField:
    def test_negative_bytes(self) -> None:
        with pytest.raises(ValidationError) as info:
            dev(0, memory=[{"total_bytes": -1}])
        assert info.value.field == "memory[0].total_bytes"
        assert "greater than or equal to 0" in str(info.value)

    def test_used_above_total(self) -> None:
        with pytest.raises(ValidationError, match=r"memory\[0\].*used_bytes \(10\) exceeds total_bytes \(5\)"):
            dev(0, memory=[{"total_bytes": 5, "used_bytes": 10}])

    def test_ratio_outside_unit_interval(self) -> None:
        with pytest.raises(ValidationError) as info:
            validate(Telemetry, {"device_id": "x:y", "timestamp": NOW, "utilization_ratio": 1.5})
        assert info.value.field == "utilization_ratio"

    def test_link_to_missing_device(self) -> None:
        with pytest.raises(ValidationError, match=r"links\[0\]\.b: no device or partition 'nvidia:GPU-9'"):
            validate(
                HostInventory,
                {
                    "host": {"hostname": "h"},
                    "collected_at": NOW,
                    "devices": [dev(0)],
                    "links": [{"a": "nvidia:GPU-0", "b": "nvidia:GPU-9", "type": "nvlink"}],
                },
            )

    def test_unknown_key_is_rejected(self) -> None:
        with pytest.raises(ValidationError, match="memory_mb"):
            dev(0, memory_mb=80)

    def test_unsupported_names_real_fields(self) -> None:
        assert dev(0, unsupported=["serial_number", "memory.ecc_enabled"]).unsupported
        with pytest.raises(ValidationError, match="unknown fields: serial"):
            dev(0, unsupported=["serial"])

    def test_duplicate_ids(self) -> None:
        with pytest.raises(ValidationError, match="duplicate device id"):
            validate(HostInventory, {"host": {"hostname": "h"}, "collected_at": NOW, "devices": [dev(0), dev(0)]})

    def test_vendor_extras_use_qualified_names(self) -> None:
        assert dev(0, extras={"huawei.com/chipName": "910B3"}).extras["huawei.com/chipName"] == "910B3"
        with pytest.raises(ValidationError, match="qualified names"):
            dev(0, extras={"chipName": "910B3"})

    def test_unsupported_telemetry_field_must_be_empty(self) -> None:
        with pytest.raises(ValidationError, match="listed as unsupported but has a value"):
            validate(
                Telemetry,
                {"device_id": "x:y", "timestamp": NOW, "power_watts": 3.0, "unsupported": ["power_watts"]},
            )


class TestUnknownIsNone:
    def test_defaults_are_none_not_zero(self) -> None:
        d = validate(Device, {"id": "amd:1", "vendor": "amd", "kind": "gpu", "model": "MI300X"})
        assert d.memory_total_bytes is None
        assert d.serial_number is None
        assert d.power.max_watts is None
        assert d.capabilities.ecc is None

    def test_memory_sum_unknown_when_any_region_unknown(self) -> None:
        d = dev(0, memory=[{"kind": "hbm", "total_bytes": 10}, {"kind": "sram", "total_bytes": None}])
        assert d.memory_total_bytes is None
        assert MemoryRegion(total_bytes=10, used_bytes=4).free_bytes == 6


class TestHealthRule:
    def test_a_reading_with_no_conditions_is_healthy(self) -> None:
        assert Health.read(NOW).state is HealthState.HEALTHY
        assert Health(checked_at=NOW).monitored is True

    def test_health_is_earned_nothing_read_is_unknown(self) -> None:
        # No reading time, no reading: "monitored" without checked_at is not earned.
        assert Health().state is HealthState.UNKNOWN and Health().monitored is False
        assert Health(monitored=True).state is HealthState.UNKNOWN
        assert Health.model_validate({"monitored": True, "checked_at": None}).monitored is False

    def test_unmonitored_is_unknown_not_healthy(self) -> None:
        assert Health.unknown().state is HealthState.UNKNOWN

    @pytest.mark.parametrize(
        ("severity", "state"),
        [
            ("info", "healthy"),
            ("warning", "healthy"),
            ("error", "degraded"),
            ("critical", "unhealthy"),
            ("fatal", "unhealthy"),
        ],
    )
    def test_worst_severity_decides(self, severity: str, state: str) -> None:
        assert derive_state([cond("info"), cond(severity)]).value == state

    def test_warning_with_pending_reset_degrades(self) -> None:
        assert derive_state([cond("warning", action="reset_device")]) is HealthState.DEGRADED

    def test_process_scoped_conditions_never_change_the_device(self) -> None:
        c = cond("critical", scope=ConditionScope.PROCESS, action=Action.RESTART_APP)
        assert derive_state([c]) is HealthState.HEALTHY

    def test_inactive_conditions_are_ignored(self) -> None:
        assert derive_state([cond("fatal", active=False)]) is HealthState.HEALTHY

    def test_lost_device_is_unhealthy_even_without_conditions(self) -> None:
        assert Health(operational=Operational.LOST).state is HealthState.UNHEALTHY
        assert Health(operational=Operational.DRAINING).state is HealthState.DEGRADED

    def test_state_is_derived_on_load(self) -> None:
        h = Health(conditions=(cond("critical"),))
        data = json.loads(h.model_dump_json())
        assert data["state"] == "unhealthy"
        data["state"] = "healthy"  # a stored state never overrides the rule
        assert Health.model_validate(data).state is HealthState.UNHEALTHY

    def test_vendor_code_format(self) -> None:
        assert cond("info", vendor_code="nvidia.xid:79").vendor_code == "nvidia.xid:79"
        with pytest.raises(Exception, match="vendor_code"):
            cond("info", vendor_code="xid 79")

    def test_severity_order(self) -> None:
        ranks = [s.rank for s in (Severity.INFO, Severity.WARNING, Severity.ERROR, Severity.CRITICAL, Severity.FATAL)]
        assert ranks == sorted(ranks)


def _pci(bus: str, root: str, path: tuple[str, ...]) -> dict[str, object]:
    return {"bus_id": bus, "pcie_root": root, "bridge_path": path}


class TestTopology:
    def inv(self, links: list[Link], devices: list[Device]) -> HostInventory:
        return HostInventory(host=Host(hostname="h"), devices=tuple(devices), links=tuple(links), collected_at=NOW)

    def test_levels_from_paths_and_links(self) -> None:
        d0 = dev(
            0, pci=_pci("0000:03:00.0", "pci0000:00", ("0000:00:01.0", "0000:01:00.0", "0000:02:00.0")), numa_node=0
        )
        d1 = dev(
            1, pci=_pci("0000:04:00.0", "pci0000:00", ("0000:00:01.0", "0000:01:00.0", "0000:02:08.0")), numa_node=0
        )
        d2 = dev(
            2, pci=_pci("0000:23:00.0", "pci0000:00", ("0000:00:03.0", "0000:21:00.0", "0000:22:00.0")), numa_node=0
        )
        d3 = dev(3, pci=_pci("0000:43:00.0", "pci0000:40", ("0000:40:01.0",)), numa_node=0)
        d4 = dev(4, pci=_pci("0000:83:00.0", "pci0000:80", ("0000:80:01.0",)), numa_node=1)
        nv = Link(a=d3.id, b=d4.id, type="nvlink", count=4)
        m = self.inv([nv], [d0, d1, d2, d3, d4]).distance_matrix()
        assert m.level(d0.id, d0.id) is DistanceLevel.X
        assert m.level(d0.id, d1.id) is DistanceLevel.PIX
        assert m.level(d0.id, d2.id) is DistanceLevel.PHB
        assert m.level(d0.id, d3.id) is DistanceLevel.NODE
        assert m.level(d0.id, d4.id) is DistanceLevel.SYS
        assert m.level(d3.id, d4.id) is DistanceLevel.LINK
        assert m.label(3, 4) == "NV4"
        assert m.pcie_levels[3][4] is DistanceLevel.SYS  # the PCIe view keeps the socket crossing
        for i in range(5):
            for j in range(5):
                assert m.levels[i][j] is m.levels[j][i]

    def test_pxb_through_several_switches(self) -> None:
        a = dev(
            0,
            pci=_pci(
                "0000:05:00.0",
                "pci0000:00",
                ("0000:00:01.0", "0000:01:00.0", "0000:02:00.0", "0000:03:00.0", "0000:04:00.0"),
            ),
        )
        b = dev(
            1,
            pci=_pci(
                "0000:09:00.0",
                "pci0000:00",
                ("0000:00:01.0", "0000:01:00.0", "0000:02:08.0", "0000:07:00.0", "0000:08:00.0"),
            ),
        )
        assert self.inv([], [a, b]).distance_matrix().level(a.id, b.id) is DistanceLevel.PXB

    def test_unknown_without_data(self) -> None:
        m = self.inv([], [dev(0), dev(1)]).distance_matrix()
        assert m.level("nvidia:GPU-0", "nvidia:GPU-1") is DistanceLevel.UNKNOWN

    def test_down_links_do_not_count(self) -> None:
        d0, d1 = dev(0, numa_node=0), dev(1, numa_node=0)
        link = Link(a=d0.id, b=d1.id, type="xgmi", state="down")
        assert self.inv([link], [d0, d1]).distance_matrix().level(d0.id, d1.id) is DistanceLevel.NODE

    def test_a_link_joins_two_devices(self) -> None:
        with pytest.raises(Exception, match="two different devices"):
            Link(a="x:1", b="x:1", type="nvlink")

    def test_domains_of(self) -> None:
        d0, d1 = dev(0), dev(1)
        inv = HostInventory(
            host=Host(hostname="h"),
            devices=(d0, d1),
            collected_at=NOW,
            domains=(Domain(id="isl", kind="nvlink_island", members=(d0.id, d1.id)),),
        )
        assert [d.id for d in inv.domains_of(d0.id)] == ["isl"]


class TestPartitions:
    def part(self, pid: str, start: int, size: int, mem: int) -> Partition:
        return Partition(
            id=pid,
            parent_id="nvidia:GPU-0",
            profile="1g",
            placement=Placement(start=start, size=size),
            memory_bytes=mem,
        )

    def test_overlapping_placements_are_rejected(self) -> None:
        with pytest.raises(ValidationError, match="overlap"):
            validate(
                HostInventory,
                {
                    "host": {"hostname": "h"},
                    "collected_at": NOW,
                    "devices": [dev(0)],
                    "partitions": [self.part("nvidia:MIG-a", 0, 4, 1), self.part("nvidia:MIG-b", 3, 2, 1)],
                },
            )

    def test_partitions_fit_their_parent(self) -> None:
        with pytest.raises(ValidationError, match="exceeds the device"):
            validate(
                HostInventory,
                {
                    "host": {"hostname": "h"},
                    "collected_at": NOW,
                    "devices": [dev(0)],
                    "partitions": [
                        self.part("nvidia:MIG-a", 0, 4, 60 * 2**30),
                        self.part("nvidia:MIG-b", 4, 4, 60 * 2**30),
                    ],
                },
            )

    def test_holes_are_fine(self) -> None:
        inv = validate(
            HostInventory,
            {
                "host": {"hostname": "h"},
                "collected_at": NOW,
                "devices": [dev(0)],
                "partitions": [self.part("nvidia:MIG-a", 0, 4, 1), self.part("nvidia:MIG-b", 6, 1, 1)],
            },
        )
        assert len(inv.partitions) == 2


class TestSchema:
    def test_schema_is_versioned_and_round_trips(self) -> None:
        schema = json_schema()
        assert schema["x-accel-schema-version"] == "1.2"
        assert "HostInventory" in schema["title"]
        assert "Device" in schema["$defs"]
        inv = HostInventory(
            host=Host(hostname="h"), devices=(dev(0, pci={"bus_id": "0000:01:00.0"}),), collected_at=NOW
        )
        again = HostInventory.model_validate_json(inv.model_dump_json())
        assert again == inv

    def test_models_are_frozen(self) -> None:
        d = dev(0)
        with pytest.raises(Exception, match="frozen"):
            d.model = "other"  # type: ignore[misc]

    def test_pci_info_requires_canonical_path(self) -> None:
        with pytest.raises(Exception, match="bridge_path"):
            PciInfo(bus_id="0000:01:00.0", bridge_path=("00:01.0",))
