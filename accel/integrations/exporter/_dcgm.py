"""dcgm-exporter's names, units and labels as Prometheus recording rules over accel's series.

Every field of dcgm-exporter's ``etc/default-counters.csv`` (NVIDIA/dcgm-exporter @
d5e5f510a1b6b393f39a43293ccd9dc985defc79; lines it ships commented out included, ``default``
False) is in :data:`DCGM_FIELDS`: produced (the accel expression, converted to dcgm-exporter's
unit: MiB, %, MHz, mJ) or not producible, with the reason.  :data:`DCGM_RULE_GROUPS` records each
produced field under its dcgm-exporter name with dcgm-exporter's labels (``gpu``, ``UUID``,
``modelName``, ``Hostname``, ``pci_bus_id``, ``DCGM_FI_DRIVER_VERSION``, and ``namespace``,
``pod``, ``container`` where the kubelet's PodResources attributes the device), so dashboards
and alerts written for dcgm-exporter (Grafana 12239) work on accel's series unchanged.

The labels come from ``accel_device_info`` by ``label_replace`` (one helper series per device,
``device:accel_dcgm_labels:info``, one per holder where pods hold the device); each value is
first reduced to one series per device (``max by (instance, job, device)``), so the rules give
the same answer with ``--labels accel`` and ``--labels dcgm``.  Series keep accel's ``device``
label (accel's stable id), where dcgm-exporter's ``device`` is ``nvidia0``: dashboards 12239
select on ``gpu`` and ``instance``, never ``device``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["DCGM_FIELDS", "DCGM_LABEL_SERIES", "DCGM_RULE_GROUPS", "DcgmField", "dcgm_rules_yaml"]

#: The helper series that carries dcgm-exporter's labels for each device (and holder).
DCGM_LABEL_SERIES = "device:accel_dcgm_labels:info"
_KEY = "instance, job, device"
_IDENT = "gpu, UUID, modelName, Hostname, pci_bus_id, DCGM_FI_DRIVER_VERSION"
_MIB = 1048576


@dataclass(frozen=True)
class DcgmField:
    """One dcgm-exporter field: its Prometheus type and unit, whether the default CSV enables it,
    and either ``expr`` (PromQL over accel's series giving one value per device, in
    dcgm-exporter's unit) with ``source`` (the accel series and the conversion, for the docs) or
    ``why`` it cannot be produced."""

    name: str
    type: str
    unit: str
    default: bool
    expr: str | None = None
    source: str | None = None
    why: str | None = None

    @property
    def produced(self) -> bool:
        return self.expr is not None


def _dev(expr: str) -> str:
    return f"max by ({_KEY}) ({expr})"


def _p(name: str, kind: str, unit: str, default: bool, expr: str, source: str) -> DcgmField:
    return DcgmField(name, kind, unit, default, expr=expr, source=source)


def _n(name: str, kind: str, unit: str, default: bool, why: str) -> DcgmField:
    return DcgmField(name, kind, unit, default, why=why)


_DCP = ("a DCP profiling field: DCGM samples it from the GPU's hardware performance counters through its "
        "profiling module; NVML, which accel reads, has no such counter")
_VIOLATION = ("accumulated throttle time (ns): accel reports the throttle reasons active at each read "
              "(accel_throttle_reason), not their accumulated duration")
_NO_LABEL = "a static label accel does not read (accel_device_info has model, uuid, bus id and driver)"

#: Every field of dcgm-exporter's default-counters.csv, in the file's order.
DCGM_FIELDS: tuple[DcgmField, ...] = (
    _p("DCGM_FI_DEV_SM_CLOCK", "gauge", "MHz", True,
       _dev('accel_clock_hertz{clock=~"sm|gfx|compute"}') + " / 1e6",
       'accel_clock_hertz{clock="sm"} (NVIDIA; "gfx" on AMD, "compute" elsewhere) / 10^6'),
    _p("DCGM_FI_DEV_MEM_CLOCK", "gauge", "MHz", True, _dev('accel_clock_hertz{clock="memory"}') + " / 1e6",
       'accel_clock_hertz{clock="memory"} / 10^6'),
    _p("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "C", True, _dev('accel_sensor_temperature_celsius{sensor="memory"}'),
       'accel_sensor_temperature_celsius{sensor="memory"}'),
    _p("DCGM_FI_DEV_GPU_TEMP", "gauge", "C", True, _dev("accel_temperature_celsius"),
       "accel_temperature_celsius (the vendor's main reading: the GPU sensor on NVIDIA)"),
    _p("DCGM_FI_DEV_POWER_USAGE", "gauge", "W", True, _dev("accel_power_watts"), "accel_power_watts"),
    _p("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "mJ", True, _dev("accel_energy_joules_total") + " * 1000",
       "accel_energy_joules_total * 1000"),
    _p("DCGM_FI_PROF_PCIE_TX_BYTES", "gauge", "bytes/s", True, _dev("accel_pcie_tx_bytes_per_second"),
       "accel_pcie_tx_bytes_per_second (NVML's sampled PCIe throughput, where DCGM reads its profiling "
       "counter; same unit)"),
    _p("DCGM_FI_PROF_PCIE_RX_BYTES", "gauge", "bytes/s", True, _dev("accel_pcie_rx_bytes_per_second"),
       "accel_pcie_rx_bytes_per_second (as TX)"),
    _p("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "retries", True, _dev("accel_pcie_replay_total"),
       "accel_pcie_replay_total"),
    _p("DCGM_FI_DEV_GPU_UTIL", "gauge", "%", True, _dev("accel_utilization_ratio") + " * 100",
       "accel_utilization_ratio * 100"),
    _p("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "%", True, _dev("accel_memory_utilization_ratio") + " * 100",
       "accel_memory_utilization_ratio * 100"),
    _n("DCGM_FI_DEV_ENC_UTIL", "gauge", "%", True, "accel's model has no video encoder utilisation"),
    _n("DCGM_FI_DEV_DEC_UTIL", "gauge", "%", True, "accel's model has no video decoder utilisation"),
    _n("DCGM_FI_DEV_XID_ERRORS", "gauge", "last XID", True,
       "accel reports an XID as a health condition whose vendor_code label names it "
       "(accel_health_condition); PromQL cannot turn a label into a sample value"),
    _n("DCGM_FI_DEV_POWER_VIOLATION", "counter", "ns", False, _VIOLATION),
    _n("DCGM_FI_DEV_THERMAL_VIOLATION", "counter", "ns", False, _VIOLATION),
    _n("DCGM_FI_DEV_SYNC_BOOST_VIOLATION", "counter", "ns", False, _VIOLATION),
    _n("DCGM_FI_DEV_BOARD_LIMIT_VIOLATION", "counter", "ns", False, _VIOLATION),
    _n("DCGM_FI_DEV_LOW_UTIL_VIOLATION", "counter", "ns", False, _VIOLATION),
    _n("DCGM_FI_DEV_RELIABILITY_VIOLATION", "counter", "ns", False, _VIOLATION),
    _n("DCGM_EXP_CLOCK_EVENTS_COUNT", "counter", "events", False,
       "dcgm-exporter counts clock events per window; accel exports the reasons active at each read"),
    _n("DCGM_EXP_XID_ERRORS_COUNT", "counter", "XIDs", False,
       "dcgm-exporter counts XIDs per window (labels err_code, err_msg); accel's XID conditions are states, "
       "not counts"),
    _n("DCGM_EXP_GPU_HEALTH_STATUS", "counter", "DCGM health result", False,
       "DCGM's health-watch result codes per watch system; the nearest is accel_health_state, whose states "
       "are not DCGM's codes"),
    _n("DCGM_EXP_P2P_STATUS", "counter", "P2P status", False,
       "dcgm-exporter's P2P status codes; the nearest is accel_link_state"),
    _p("DCGM_FI_DEV_FB_FREE", "gauge", "MiB", True, _dev("accel_memory_free_bytes") + f" / {_MIB}",
       "accel_memory_free_bytes / 2^20"),
    _p("DCGM_FI_DEV_FB_USED", "gauge", "MiB", True, _dev("accel_memory_used_bytes") + f" / {_MIB}",
       "accel_memory_used_bytes / 2^20"),
    _p("DCGM_FI_DEV_FB_RESERVED", "gauge", "MiB", True,
       f"({_dev('accel_memory_total_bytes')} - {_dev('accel_memory_used_bytes')} - "
       f"{_dev('accel_memory_free_bytes')}) / {_MIB}",
       "(accel_memory_total_bytes - used - free) / 2^20: NVML's v2 memory info, where total = reserved + used "
       "+ free (0 where only v1 was readable, whose used includes the reserved part)"),
    _p("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "errors", False, _dev("accel_ecc_corrected_total"),
       "accel_ecc_corrected_total (NVIDIA: the volatile single-bit total)"),
    _p("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "errors", False, _dev("accel_ecc_uncorrected_total"),
       "accel_ecc_uncorrected_total (NVIDIA: the volatile double-bit total)"),
    _n("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "counter", "errors", False,
       "accel exports the volatile ECC totals only (the aggregate ones survive reboots)"),
    _n("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "counter", "errors", False,
       "accel exports the volatile ECC totals only"),
    _n("DCGM_FI_DEV_RETIRED_SBE", "counter", "pages", False,
       "accel_retired_pages_total is single-bit plus double-bit retirements, not split"),
    _n("DCGM_FI_DEV_RETIRED_DBE", "counter", "pages", False, "as DCGM_FI_DEV_RETIRED_SBE"),
    _n("DCGM_FI_DEV_RETIRED_PENDING", "counter", "pages", False,
       "a pending retirement is a health condition in accel (pending reset), not a count"),
    _n("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "counter", "errors", False,
       "accel_link_crc_errors_total (NVML's per-link data-link CRC counter) does not say flit or data"),
    _n("DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", "counter", "errors", False,
       "as DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"),
    _p("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "counter", "errors", False,
       f"sum by ({_KEY}) (accel_link_replay_errors_total)", "sum over links of accel_link_replay_errors_total"),
    _p("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", "counter", "errors", False,
       f"sum by ({_KEY}) (accel_link_recovery_errors_total)",
       "sum over links of accel_link_recovery_errors_total"),
    _n("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter", "DCGM bandwidth counter", True,
       "the CSV says 'bandwidth counters for all lanes' without a unit, and no DCGM source read here gives "
       "one; accel's per-link byte counters (accel_link_rx_bytes_total, accel_link_tx_bytes_total) are not "
       "claimed to be it"),
    _n("DCGM_FI_DEV_NVLINK_BANDWIDTH_L0", "counter", "bytes", False,
       "lane 0 of NVLink traffic with headers; accel counts per link (accel_link_rx_bytes_total{link=...}) "
       "without saying whether headers are included"),
    _n("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge", "status", True, "accel does not read vGPU licensing"),
    _n("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", "rows", True,
       "accel counts remapped rows and retired pages together (accel_retired_pages_total), not by cause"),
    _n("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "rows", True, "as UNCORRECTABLE_REMAPPED_ROWS"),
    _n("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "bool", True,
       "a failed remap is a health condition in accel (accel_health_condition), not a series of its own"),
    DcgmField("DCGM_FI_DRIVER_VERSION", "label", "driver version", True, expr=None,
              source='label on every series, from accel_device_info{driver}', why=None),
    _n("DCGM_FI_NVML_VERSION", "label", "", False, _NO_LABEL),
    _n("DCGM_FI_DEV_BRAND", "label", "", False, _NO_LABEL),
    _n("DCGM_FI_DEV_SERIAL", "label", "", False, _NO_LABEL),
    _n("DCGM_FI_DEV_OEM_INFOROM_VER", "label", "", False, _NO_LABEL),
    _n("DCGM_FI_DEV_ECC_INFOROM_VER", "label", "", False, _NO_LABEL),
    _n("DCGM_FI_DEV_POWER_INFOROM_VER", "label", "", False, _NO_LABEL),
    _n("DCGM_FI_DEV_INFOROM_IMAGE_VER", "label", "", False, _NO_LABEL),
    _n("DCGM_FI_DEV_VBIOS_VERSION", "label", "", False, _NO_LABEL),
    _n("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "ratio", True,
       _DCP + " (DCGM_FI_DEV_GPU_UTIL, from accel_utilization_ratio, is the nearest; it is not the same ratio)"),
    _n("DCGM_FI_PROF_SM_ACTIVE", "gauge", "ratio", False, _DCP),
    _n("DCGM_FI_PROF_SM_OCCUPANCY", "gauge", "ratio", False, _DCP),
    _n("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "ratio", True, _DCP),
    _n("DCGM_FI_PROF_DRAM_ACTIVE", "gauge", "ratio", True,
       _DCP + " (DCGM_FI_DEV_MEM_COPY_UTIL is the nearest)"),
    _n("DCGM_FI_PROF_PIPE_FP64_ACTIVE", "gauge", "ratio", False, _DCP),
    _n("DCGM_FI_PROF_PIPE_FP32_ACTIVE", "gauge", "ratio", False, _DCP),
    _n("DCGM_FI_PROF_PIPE_FP16_ACTIVE", "gauge", "ratio", False, _DCP),
)


def _labels_expr() -> str:
    info = "accel_device_info"
    for new, old in (("gpu", "index"), ("UUID", "uuid"), ("modelName", "model"), ("Hostname", "hostname"),
                     ("pci_bus_id", "bus_id"), ("DCGM_FI_DRIVER_VERSION", "driver")):
        info = f'label_replace({info}, "{new}", "$1", "{old}", "(.*)")'
    ident = f"max by ({_KEY}, {_IDENT}) ({info})"
    # One series per holder where the kubelet attributes the device, else one per device.
    held = (f"max by ({_KEY}, {_IDENT}, namespace, pod, container) "
            f"(accel_device_pod_info * on ({_KEY}) group_left ({_IDENT}) {ident})")
    return f"{held} or on ({_KEY}) {ident}"


def _rules() -> list[dict[str, Any]]:
    rules: list[dict[str, Any]] = [{"record": DCGM_LABEL_SERIES, "expr": _labels_expr()}]
    for f in DCGM_FIELDS:
        if f.expr is None:
            continue
        rules.append({"record": f.name,
                      "expr": f"({f.expr}) * on ({_KEY}) group_right () {DCGM_LABEL_SERIES}"})
    return rules


#: The recording rules (``accel exporter rules --dcgm``; docs/exporter.md "dcgm-exporter names").
DCGM_RULE_GROUPS: tuple[Mapping[str, Any], ...] = ({"name": "accel.dcgm-exporter-names", "rules": _rules()},)


def dcgm_rules_yaml() -> str:
    """The dcgm-exporter-compatible recording rules as a Prometheus rule file."""
    from ._rules import rules_yaml

    text = rules_yaml(DCGM_RULE_GROUPS)
    return text.replace("# Prometheus rules for accel exporter (generated by `accel exporter rules`).",
                        "# dcgm-exporter's names, units and labels recorded from accel exporter's series "
                        "(accel.integrations.exporter._dcgm).", 1)
