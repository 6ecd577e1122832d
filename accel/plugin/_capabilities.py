"""Capabilities are fail-closed data: every flag is False unless a plugin declares it."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["CAPABILITY_DOCS", "Capability"]


class Capability(StrEnum):
    INVENTORY = "inventory"
    MEMORY = "memory"
    MEMORY_USED = "memory_used"
    UUID = "uuid"
    SERIAL = "serial"
    PCI = "pci"
    NUMA = "numa"
    TOPOLOGY = "topology"
    LINKS = "links"
    DOMAINS = "domains"
    HEALTH = "health"
    ECC = "ecc"
    TELEMETRY = "telemetry"
    POWER = "power"
    ENERGY = "energy"
    TEMPERATURE = "temperature"
    CLOCKS = "clocks"
    UTILIZATION = "utilization"
    PROCESSES = "processes"
    EVENTS = "events"
    PARTITIONS = "partitions"
    PARTITION_ACTUATION = "partition_actuation"
    SHARING = "sharing"
    VERSIONS = "versions"


#: One sentence per capability: what a backend promises when it declares it.
CAPABILITY_DOCS: dict[Capability, str] = {
    Capability.INVENTORY: "Lists every device the runtime can schedule, with model and vendor.",
    Capability.MEMORY: "Reports total device memory in bytes.",
    Capability.MEMORY_USED: "Reports used device memory in bytes.",
    Capability.UUID: "Reports a real vendor UUID, used for the stable device id.",
    Capability.SERIAL: "Reports the board serial number.",
    Capability.PCI: "Reports each device's PCI bus id.",
    Capability.NUMA: "Reports each device's NUMA node and CPU affinity.",
    Capability.TOPOLOGY: "Reports PCIe/NUMA distances between devices.",
    Capability.LINKS: "Reports vendor device-to-device links (NVLink, xGMI, HCCS...).",
    Capability.DOMAINS: "Reports link domains (NVLink islands, xGMI hives, HCCS groups).",
    Capability.HEALTH: "Reports device health as typed conditions.",
    Capability.ECC: "Reports ECC mode and error counters.",
    Capability.TELEMETRY: "Returns timestamped telemetry samples.",
    Capability.POWER: "Reports power draw in watts.",
    Capability.ENERGY: "Reports a monotonic energy counter in joules.",
    Capability.TEMPERATURE: "Reports temperatures in degrees Celsius.",
    Capability.CLOCKS: "Reports clocks in hertz.",
    Capability.UTILIZATION: "Reports compute utilisation as a 0..1 ratio.",
    Capability.PROCESSES: "Lists processes using each device (SupportsProcesses).",
    Capability.EVENTS: "Streams health events such as XIDs (SupportsEvents).",
    Capability.PARTITIONS: "Reports hardware partitions and profiles (SupportsPartitions).",
    Capability.PARTITION_ACTUATION: (
        "Creates and destroys partitions from a profile (SupportsPartitionActuation), "
        "refusing with a typed PartitionError."
    ),
    Capability.SHARING: "Reports software sharing modes and divisible capacity.",
    Capability.VERSIONS: "Reports driver and runtime versions.",
}
