"""Human renderings: plain aligned tables, units for people (GiB, W, C)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..model import Device, DistanceMatrix, Domain, Health, HostInventory, Telemetry

__all__ = ["bytes_h", "device_table", "health_table", "process_table", "table", "telemetry_table", "topo_text"]


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    lines = ["  ".join(h.ljust(widths[i]) for i, h in enumerate(headers)).rstrip()]
    for row in rows:
        lines.append("  ".join(c.ljust(widths[i]) for i, c in enumerate(row)).rstrip())
    return "\n".join(lines)


def bytes_h(value: int | None) -> str:
    if value is None:
        return "-"
    units = ["B", "KiB", "MiB", "GiB", "TiB"]
    x = float(value)
    for unit in units:
        if x < 1024 or unit == units[-1]:
            return f"{x:.1f} {unit}" if unit != "B" else f"{int(x)} B"
        x /= 1024
    return f"{value} B"


def _opt(value: object, fmt: str = "{}") -> str:
    return "-" if value is None else fmt.format(value)


def device_table(inv: HostInventory, positions: Mapping[str, int] | None = None) -> str:
    """``accel ls``; ``#`` is the device's position in the whole list (``positions``, when the
    table shows a selection), so ``-i 3`` shows device 3 as 3."""
    rows = []
    for n, d in enumerate(inv.devices):
        rows.append(
            [
                str(positions.get(d.id, n) if positions is not None else n),
                d.vendor,
                d.kind.value,
                d.model,
                bytes_h(d.memory_total_bytes),
                bytes_h(d.memory_used_bytes),
                d.health.state.value,
                d.id,
            ]
        )
    return table(["#", "VENDOR", "KIND", "MODEL", "MEMORY", "USED", "HEALTH", "ID"], rows)


def _joined(*parts: object, sep: str = " ") -> str | None:
    """The known parts joined, or ``None`` when none is known (never a literal "None")."""
    known = [str(p) for p in parts if p not in (None, "")]
    return sep.join(known) if known else None


def device_text(d: Device) -> str:
    pairs: list[tuple[str, object]] = [
        ("vendor / kind", f"{d.vendor} / {d.kind.value}"),
        ("model", d.model),
        ("index", d.index),
        ("uuid", d.uuid),
        ("serial", d.serial_number),
        ("architecture", d.architecture),
        ("compute capability", d.compute_capability or d.isa),
        ("pci bus id", d.pci.bus_id if d.pci else None),
        ("pcie root", d.pci.pcie_root if d.pci else None),
        ("numa node", d.numa_node),
        ("cpu affinity", d.cpu_affinity),
        ("board", d.board_id),
        ("driver", d.versions.driver),
        ("runtime", _joined(d.versions.runtime_name, d.versions.runtime) if d.versions.runtime else None),
        ("memory total", bytes_h(d.memory_total_bytes)),
        ("memory used", bytes_h(d.memory_used_bytes)),
        ("compute units", _joined(d.compute.units, d.compute.unit_kind) if d.compute.units else None),
        ("power limit", _opt(d.power.enforced_watts or d.power.max_watts, "{:g} W")),
        ("partition mode", d.partition_mode.scheme.value),
        ("sharing", d.sharing.mode.value),
        ("visible as", f"{d.binding.visible_env}={d.binding.visible_id}" if d.binding.visible_env else None),
        ("torch / collective", _joined(d.binding.torch_device_type, d.binding.collective_backend, sep=" / ")),
        ("health", f"{d.health.state.value} ({d.health.operational.value})"),
    ]
    rows = [(k, v) for k, v in pairs if v not in (None, "-")]
    rows += [(k, v) for k, v in sorted(d.extras.items())]
    if d.unsupported:
        rows.append(("unsupported", ", ".join(sorted(d.unsupported))))
    # Labels never run into values: the column is as wide as the longest label, plus two.
    width = max(len(k) for k, _ in rows) + 2
    lines = [f"{d.id}"]
    for key, value in rows:
        lines.append(f"  {key:<{width}}{value}")
        if key == "health":
            for c in d.health.conditions:
                code = f" {c.vendor_code}" if c.vendor_code else ""
                lines.append(f"    - {c.severity.value} {c.subsystem.value}/{c.reason}{code} -> {c.action.value}")
    return "\n".join(lines)


def process_table(inv: HostInventory, positions: Mapping[str, int] | None = None) -> str:
    """``accel ps``: one row per process per device (``#`` is the device's position in
    ``accel ls``), device memory in GiB/MiB; an unknown name or memory is ``-``."""
    position = dict(positions) if positions is not None else {d.id: i for i, d in enumerate(inv.devices)}
    rows = []
    for proc in sorted(inv.processes, key=lambda p: (position.get(p.device_id, len(position)), p.pid)):
        where = str(position[proc.device_id]) if proc.device_id in position else "?"
        part, name = proc.partition_id or "-", proc.name or "-"
        rows.append([where, proc.device_id, part, str(proc.pid), name, bytes_h(proc.memory_bytes)])
    return table(["#", "DEVICE", "PARTITION", "PID", "NAME", "MEMORY"], rows)


def health_table(health: dict[str, Health]) -> str:
    rows = []
    for dev_id, h in health.items():
        conds = "; ".join(
            f"{c.severity.value}:{c.reason}{'(' + c.vendor_code + ')' if c.vendor_code else ''}" for c in h.conditions
        )
        rows.append([dev_id, h.state.value, h.operational.value, conds or "-"])
    return table(["ID", "STATE", "OPERATIONAL", "CONDITIONS"], rows)


def telemetry_table(samples: Sequence[Telemetry]) -> str:
    rows = []
    for t in samples:
        rows.append(
            [
                t.device_id,
                _opt(None if t.utilization_ratio is None else t.utilization_ratio * 100, "{:.0f}%"),
                bytes_h(t.memory_used_bytes),
                _opt(t.power_watts, "{:.1f} W"),
                _opt(t.temperature_celsius, "{:.0f} C"),
                ",".join(t.throttle_reasons) or "-",
            ]
        )
    return table(["ID", "UTIL", "MEM USED", "POWER", "TEMP", "THROTTLE"], rows)


def topo_text(
    inv: HostInventory,
    matrix: DistanceMatrix,
    *,
    positions: Mapping[str, int] | None = None,
    domains: Sequence[Domain] | None = None,
) -> str:
    """``accel topo``: the matrix, the devices, their domains and the legend.

    ``D#`` is a device's position in ``accel ls`` (``positions``; the matrix's own order without
    it), so ``-i 2,5`` shows D2 and D5.  ``domains`` (default: ``inv.domains``) may name members
    outside the selection: a domain is listed whole, its other members by their ``D#`` too.
    """
    at = dict(positions) if positions is not None else {d: i for i, d in enumerate(matrix.device_ids)}
    n = len(matrix.device_ids)
    names = [f"D{at.get(dev_id, i)}" for i, dev_id in enumerate(matrix.device_ids)]
    headers = ["", *names, "CPU AFFINITY", "NUMA"]
    rows = []
    for i in range(n):
        dev = inv.devices[i]
        rows.append([names[i], *(matrix.label(i, j) for j in range(n)), dev.cpu_affinity or "-", _opt(dev.numa_node)])
    out = [table(headers, rows), ""]
    for i, dev_id in enumerate(matrix.device_ids):
        out.append(f"{names[i]} = {dev_id}")
    out.append("")
    shown = list(inv.domains if domains is None else domains)
    out.append("Domains:" if shown else "Domains: none")
    for dom in shown:
        members = ", ".join(f"D{at[m]}" if m in at else m for m in dom.members)
        out.append(f"  {dom.id} ({dom.kind.value}, {dom.size} devices): {members}")
    out.append("")
    out.append(
        "Legend: X = self, NV# = NVLink/NVSwitch with # links, XGMI/HCCS/... = vendor link, PIX = one PCIe switch, "
        "PXB = several switches, PHB = host bridge, NODE = same NUMA node, SYS = across sockets; "
        "D# = the device's position in `accel ls`"
    )
    return "\n".join(out)


def domains_json(domains: Sequence[Domain]) -> list[dict[str, object]]:
    return [d.model_dump(mode="json") for d in domains]
