"""What a caller will use of a reading (:class:`Reading`), so that a backend may skip the rest."""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

__all__ = ["READING_DOCS", "Reading", "describe_readings"]


class Reading(StrEnum):
    """A group of values a caller can ask a backend for.

    :attr:`BackendConfig.readings <accel.plugin.BackendConfig.readings>` is a set of
    :class:`Reading` groups, or ``None`` (the default: everything).  It is a hint, never a filter
    on the answer: a backend that cannot narrow its reads ignores it and answers in full, which is
    still correct.  A backend that honours it

    * always reads identity (ids, model, UUID, PCI address, versions, memory size), every device it
      can see, operational loss, and the partitions that give processes their place;
    * leaves every value of a group it was not asked for unread: ``None`` or empty, never 0, and
      never named in ``unsupported`` (it was not asked, not refused);
    * without :attr:`Reading.HEALTH` reads no health: every device's health is ``unknown`` with
      ``monitored`` false and no ``checked_at`` (health is earned), except a device found lost;
    * says so in its inventory: the ``detail`` of its :class:`~accel.model.SourceInfo` names the
      groups read (:func:`describe_readings`), so a stored inventory shows it was narrowed.

    :meth:`Backend.health` is an explicit request for health and always reads it.
    """

    MEMORY = "memory"
    UTILIZATION = "utilization"
    CLOCKS = "clocks"
    POWER = "power"
    ENERGY = "energy"
    TEMPERATURE = "temperature"
    FAN = "fan"
    THROTTLE = "throttle"
    PCIE = "pcie"
    ERRORS = "errors"
    LINKS = "links"
    TOPOLOGY = "topology"
    HEALTH = "health"
    PROCESSES = "processes"


#: One line per group: the model values it covers (for plugin authors and tools).
READING_DOCS: dict[Reading, str] = {
    Reading.MEMORY: "memory used, free and total (Telemetry.memory_*, each region's used_bytes)",
    Reading.UTILIZATION: "compute and memory utilisation (Telemetry.utilization_ratio, memory_utilization_ratio)",
    Reading.CLOCKS: "current clocks per domain (Telemetry.clocks_hertz)",
    Reading.POWER: "power draw and limits (Telemetry.power_watts, Device.power)",
    Reading.ENERGY: "the energy counter (Telemetry.energy_joules)",
    Reading.TEMPERATURE: "temperatures and thermal limits (Telemetry.temperature_celsius, temperatures_celsius)",
    Reading.FAN: "fan speed (Telemetry.fan_ratio)",
    Reading.THROTTLE: "active clock throttle reasons (Telemetry.throttle_reasons)",
    Reading.PCIE: "PCIe throughput (Telemetry.pcie_rx/tx_bytes_per_s)",
    Reading.ERRORS: "error counters: ECC, retired pages, PCIe replays (Telemetry.*_total, ECC mode)",
    Reading.LINKS: "per-link counters of device links (Telemetry.links)",
    Reading.TOPOLOGY: "links and domains of the inventory, current PCIe link generation and width",
    Reading.HEALTH: "health conditions and state, device events",
    Reading.PROCESSES: "processes using the devices (HostInventory.processes)",
}


def describe_readings(readings: Iterable[Reading]) -> str:
    """The note a narrowed read puts in its ``SourceInfo.detail`` (groups in a stable order)."""
    got = set(readings)
    return "narrowed read: " + (", ".join(r.value for r in Reading if r in got) or "identity only")
