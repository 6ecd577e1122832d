"""The amdgpu sysfs interface: fallback where no library answers, and an independent oracle.

Reads ``<root>/class/drm/card*/device/`` (the files exist wherever the amdgpu kernel driver,
or Hygon's fork of it, is bound) and the KFD topology under ``<root>/class/kfd/kfd/topology``.
Every file is optional; a file that is missing or unreadable leaves its part ``None``.
Formats (kernel ``amdgpu_*.c``):

* ``mem_info_vram_total`` / ``mem_info_vram_used``: bytes; ``gpu_busy_percent``: percent.
* ``unique_id``: the ASIC serial as bare hex.
* ``current_link_speed``: ``16.0 GT/s PCIe``; ``current_link_width``: lanes.
* ``ras/<block>_err_count``: ``ue: N`` / ``ce: N`` (newer kernels add ``de: N``).
* ``ras/gpu_vram_bad_pages``: ``0x<pfn> : 0x<size> : R|P|F`` (reserved, pending, failed).
* ``hwmon/hwmon*/temp<N>_input`` (millidegrees) with ``temp<N>_label`` (edge, junction, mem),
  ``temp<N>_crit`` / ``temp<N>_emergency``; ``power1_average`` or ``power1_input`` (microwatts),
  ``power1_cap`` / ``_cap_max`` / ``_cap_min`` / ``_cap_default`` (microwatts).
* ``xgmi_hive_info/xgmi_hive_id``; ``xgmi_device_id``.
* ``current_compute_partition`` (``SPX``, ``CPX``...) and ``current_memory_partition`` (``NPS1``).
* KFD ``io_links/*/properties``: ``type 11`` is xGMI (KFD numbering), ``node_to`` the peer.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ._readings import BadPage, EccCount, GpuReading, normalize_unique_id, pcie_gen_from_speed

__all__ = ["driver_live", "kfd_xgmi_pairs", "read_cards"]

_CARD = re.compile(r"^card([0-9]+)$")
_BUS = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
_KFD_XGMI = 11
_LAYER = "sysfs"


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None


def _int(text: str | None, base: int = 10) -> int | None:
    if text is None:
        return None
    try:
        value = int(text.split()[0], base) if text.split() else None
    except ValueError:
        return None
    return value


def _nonneg(text: str | None) -> int | None:
    value = _int(text)
    return value if value is not None and value >= 0 else None


def driver_live(root: Path) -> bool | None:
    """``True`` when ``module/amdgpu/initstate`` says ``live``; ``None`` when the file is absent."""
    text = _read(root / "module" / "amdgpu" / "initstate")
    if text is None:
        return None
    return text == "live"


def _err_count(text: str | None) -> EccCount | None:
    if text is None:
        return None
    values: dict[str, int] = {}
    for line in text.splitlines():
        m = re.match(r"^\s*(ue|ce|de)\s*:\s*([0-9]+)\s*$", line)
        if m:
            values[m.group(1)] = int(m.group(2))
    if not values:
        return None
    return EccCount(correctable=values.get("ce"), uncorrectable=values.get("ue"), deferred=values.get("de"))


_PAGE_STATUS = {"R": "reserved", "P": "pending", "F": "unreservable"}


def _bad_pages(text: str | None) -> tuple[BadPage, ...] | None:
    if text is None:
        return None
    pages = []
    for line in text.splitlines():
        m = re.match(r"^\s*0x([0-9a-fA-F]+)\s*:\s*0x([0-9a-fA-F]+)\s*:\s*([RPF])\s*$", line)
        if m:
            # The first field is the page frame number, the second the size in bytes.
            pages.append(BadPage(int(m.group(1), 16) << 12, int(m.group(2), 16), _PAGE_STATUS[m.group(3)]))
    return tuple(pages)


def _hwmon(device: Path, r: GpuReading) -> None:
    base = device / "hwmon"
    try:
        names = sorted(os.listdir(base))
    except OSError:
        return
    for name in names:
        d = base / name
        for n in range(1, 8):
            value = _int(_read(d / f"temp{n}_input"))
            if value is None:
                continue
            label = (_read(d / f"temp{n}_label") or f"temp{n}").lower()
            label = {"mem": "memory", "hotspot": "junction"}.get(label, label)
            r.temperatures_celsius[label] = value / 1000.0
            if label == "junction":
                crit = _nonneg(_read(d / f"temp{n}_crit"))
                emerg = _nonneg(_read(d / f"temp{n}_emergency"))
                if crit:
                    r.temp_slowdown_celsius = crit / 1000.0
                if emerg:
                    r.temp_shutdown_celsius = emerg / 1000.0
        power = _nonneg(_read(d / "power1_average"))
        if power is None:
            power = _nonneg(_read(d / "power1_input"))
        if power is not None:
            r.power_watts = power / 1e6
        for attr, fname in (
            ("power_cap_watts", "power1_cap"),
            ("power_cap_max_watts", "power1_cap_max"),
            ("power_cap_min_watts", "power1_cap_min"),
            ("power_cap_default_watts", "power1_cap_default"),
        ):
            uw = _nonneg(_read(d / fname))
            if uw is not None:
                setattr(r, attr, uw / 1e6)
        energy = _nonneg(_read(d / "energy1_input"))
        if energy is not None:
            r.energy_joules = energy / 1e6
        break


def _card(root: Path, card: str, vendor_ids: set[str]) -> GpuReading | None:
    device = root / "class" / "drm" / card / "device"
    vendor = (_read(device / "vendor") or "").lower().removeprefix("0x")
    if vendor not in vendor_ids:
        return None
    try:
        bus = Path(os.path.realpath(device)).name
    except OSError:
        return None
    if not _BUS.match(bus):
        return None
    r = GpuReading(bus_id=bus, card_node=card)
    r.vendor_id = vendor
    dev_id = (_read(device / "device") or "").lower().removeprefix("0x")
    r.pci_device_id = dev_id if re.fullmatch(r"[0-9a-f]{4}", dev_id) else None
    rev = (_read(device / "revision") or "").lower()
    r.pci_revision = rev if re.fullmatch(r"0x[0-9a-f]{2}", rev) else None
    r.memory_total_bytes = _nonneg(_read(device / "mem_info_vram_total"))
    r.memory_used_bytes = _nonneg(_read(device / "mem_info_vram_used"))
    busy = _nonneg(_read(device / "gpu_busy_percent"))
    r.utilization_ratio = min(busy, 100) / 100.0 if busy is not None else None
    mbusy = _nonneg(_read(device / "mem_busy_percent"))
    r.memory_utilization_ratio = min(mbusy, 100) / 100.0 if mbusy is not None else None
    r.unique_id = normalize_unique_id(_read(device / "unique_id"))
    serial = _read(device / "serial_number")
    r.serial_number = serial if serial and serial.upper() not in ("N/A", "NA", "0") else None
    product = _read(device / "product_name")
    r.name = product or None
    vbios = _read(device / "vbios_version")
    r.vbios_version = vbios or None
    numa = _int(_read(device / "numa_node"))
    r.numa_node = numa if numa is not None and numa >= 0 else None
    for attr, fname in (("pcie_gen_current", "current_link_speed"), ("pcie_gen_max", "max_link_speed")):
        m = re.match(r"^([0-9.]+)\s*GT/s", _read(device / fname) or "")
        if m:
            setattr(r, attr, pcie_gen_from_speed(float(m.group(1))))
    r.pcie_width_current = _nonneg(_read(device / "current_link_width")) or None
    r.pcie_width_max = _nonneg(_read(device / "max_link_width")) or None
    replay = _nonneg(_read(device / "pcie_replay_count"))
    r.pcie_replay_total = replay
    ras = device / "ras"
    if ras.is_dir():
        try:
            entries = sorted(os.listdir(ras))
        except OSError:
            entries = []
        for entry in entries:
            if entry.endswith("_err_count"):
                count = _err_count(_read(ras / entry))
                if count is not None:
                    r.ecc_blocks[entry.removesuffix("_err_count").upper()] = count
        r.bad_pages = _bad_pages(_read(ras / "gpu_vram_bad_pages"))
        if r.ecc_blocks:
            r.ecc_supported = True
            r.ecc_enabled = True
            r.ecc_total = EccCount(
                correctable=sum(c.correctable or 0 for c in r.ecc_blocks.values()),
                uncorrectable=sum(c.uncorrectable or 0 for c in r.ecc_blocks.values()),
                deferred=sum(c.deferred or 0 for c in r.ecc_blocks.values()),
            )
    threshold = _int(_read(root / "module" / "amdgpu" / "parameters" / "bad_page_threshold"))
    # -1 means "driver default", -2 "ignore": neither is a number of pages.
    r.bad_page_threshold = threshold if threshold is not None and threshold > 0 else None
    _hwmon(device, r)
    hive = _read(device / "xgmi_hive_info" / "xgmi_hive_id")
    if hive and hive.strip("0"):
        hv = _int(hive) if hive.isdigit() else _int(hive.removeprefix("0x"), 16)
        r.xgmi_hive_id = f"0x{hv:x}" if hv else None
    node = _nonneg(_read(device / "xgmi_physical_id"))
    r.xgmi_node_id = node
    for attr, fname in (
        ("compute_partition", "current_compute_partition"),
        ("memory_partition", "current_memory_partition"),
    ):
        text = _read(device / fname)
        if text and re.fullmatch(r"[A-Z]{2,4}[0-9]?", text.strip()):
            setattr(r, attr, text.strip())
    drm = device / "drm"
    try:
        renders = sorted(n for n in os.listdir(drm) if n.startswith("renderD"))
    except OSError:
        renders = []
    r.render_node = renders[0] if renders else None
    r.driver_version = _read(root / "module" / "amdgpu" / "version") or None
    r.sources = {"*": _LAYER}
    return r


def read_cards(root: Path, vendor_ids: tuple[str, ...] = ("1002",)) -> list[GpuReading]:
    """One reading per DRM card whose PCI vendor is in ``vendor_ids``, ordered by bus id."""
    base = root / "class" / "drm"
    try:
        cards = sorted((n for n in os.listdir(base) if _CARD.match(n)), key=lambda n: int(n[4:]))
    except OSError:
        return []
    out: dict[str, GpuReading] = {}
    for card in cards:
        r = _card(root, card, set(vendor_ids))
        if r is not None and r.bus_id is not None and r.bus_id not in out:
            out[r.bus_id] = r
    return [out[b] for b in sorted(out)]


def _props(path: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in (_read(path) or "").splitlines():
        parts = line.split()
        if len(parts) == 2:
            try:
                out[parts[0]] = int(parts[1])
            except ValueError:
                continue
    return out


def kfd_xgmi_pairs(root: Path) -> list[tuple[str, str, int | None]]:
    """xGMI io-links from the KFD topology: ``(bus_a, bus_b, weight)`` per direct link.

    A KFD node's ``location_id`` is ``bus << 8 | device << 3 | function`` with ``domain``
    beside it; CPU nodes have ``location_id 0`` and no ``gpu_id``.
    """
    base = root / "class" / "kfd" / "kfd" / "topology" / "nodes"
    try:
        nodes = sorted((n for n in os.listdir(base) if n.isdigit()), key=int)
    except OSError:
        return []
    bus_of: dict[int, str] = {}
    links: list[tuple[int, int, int | None]] = []
    for n in nodes:
        props = _props(base / n / "properties")
        gpu_id = _int(_read(base / n / "gpu_id"))
        if not gpu_id:
            continue
        loc = props.get("location_id", 0)
        domain = props.get("domain", 0)
        bus_of.setdefault(int(n), f"{domain:04x}:{(loc >> 8) & 0xFF:02x}:{(loc >> 3) & 0x1F:02x}.{loc & 7}")
        try:
            link_dirs = sorted(os.listdir(base / n / "io_links"))
        except OSError:
            link_dirs = []
        for link in link_dirs:
            lp = _props(base / n / "io_links" / link / "properties")
            if lp.get("type") == _KFD_XGMI and "node_to" in lp:
                links.append((int(n), lp["node_to"], lp.get("weight")))
    out = []
    for a, b, weight in links:
        ba, bb = bus_of.get(a), bus_of.get(b)
        if ba and bb and ba != bb:
            out.append((ba, bb, weight))
    return out
