"""Boundary module for the ``amdsmi`` Python package: the only place that imports it.

``import amdsmi`` is fragile: without ``libamd_smi.so`` the package prints to stdout and raises
``KeyError`` (PyPI 7.0.2), and a broken install raises ``OSError``.  :func:`load_amdsmi` guards
all three and swallows the print.  Every call goes through :meth:`AmdSmiReader._call`, which
maps the package's exceptions (``AmdSmiLibraryException`` by ``get_error_code()``, never by
message) to :mod:`accel.errors`; "not supported" answers become ``None`` and are remembered in
``GpuReading.not_supported``.  Values the package returns as the string ``"N/A"`` inside numeric
slots become ``None``.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from accel.errors import (
    AccelError,
    DeviceLostError,
    DriverError,
    LibraryNotFoundError,
    NotSupportedError,
    PermissionDeniedError,
)

from ._readings import BadPage, EccCount, GpuReading, ProcessReading, normalize_unique_id

__all__ = ["AmdSmiReader", "load_amdsmi", "map_amdsmi_error"]

_LAYER = "amdsmi"

# amdsmi status codes (amdsmi.h / amdsmi_interface.py 7.0.2).
_NOT_SUPPORTED = {2, 3, 40}  # NOT_SUPPORTED, NOT_YET_IMPLEMENTED, NO_DATA
_NO_PERM = 10
_NOT_FOUND = 31
_NOT_INIT = 32
_DRIVER_NOT_LOADED = 34
_FAIL_LOAD = {4, 5}

#: ``AmdSmiGpuBlock`` members read for per-block ECC / RAS state, in reporting order.
_BLOCKS = ("UMC", "SDMA", "GFX", "MMHUB", "PCIE_BIF", "HDP", "XGMI_WAFL")

_PAGE_STATUS = {0: "reserved", 1: "pending", 2: "unreservable"}

_VIOLATIONS = {
    "active_socket_thrm": "thermal",
    "active_prochot_thrm": "prochot",
    "active_vr_thrm": "vr_thermal",
    "active_hbm_thrm": "hbm_thermal",
    "active_ppt_pwr": "power",
}


def load_amdsmi(name: str = "amdsmi") -> tuple[ModuleType | None, str]:
    """Import the package quietly: ``(module, "")`` or ``(None, why)``.

    Catches ``ImportError``, ``KeyError`` (library missing) and ``OSError`` (broken library),
    and whatever the import printed is returned in the reason instead of reaching stdout.
    """
    sink = io.StringIO()
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            module = importlib.import_module(name)
    except ImportError as exc:
        return None, f"amdsmi is not installed ({exc})"
    except (KeyError, OSError) as exc:
        sys.modules.pop(name, None)
        printed = " ".join(sink.getvalue().split())[:200]
        tail = f" - {printed}" if printed else ""
        return None, f"amdsmi cannot load libamd_smi.so ({type(exc).__name__}: {exc}){tail}"
    return module, ""


def map_amdsmi_error(module: ModuleType, exc: BaseException, what: str, device_id: str | None = None) -> AccelError:
    """The accel error for an exception raised by an amdsmi call; ``what`` names the call."""
    lib_exc = getattr(module, "AmdSmiLibraryException", None)
    param_exc = getattr(module, "AmdSmiParameterException", None)
    if lib_exc is not None and isinstance(exc, lib_exc):
        try:
            code = int(exc.get_error_code())
        except (AttributeError, TypeError, ValueError):
            code = -1
        vendor_code = f"amd.smi:{code}"
        msg = f"{what} failed: amdsmi status {code}"
        if code in _NOT_SUPPORTED:
            return NotSupportedError(f"{what} is not supported (amdsmi status {code})", device_id=device_id)
        if code == _NO_PERM:
            return PermissionDeniedError(f"{what}: permission denied (amdsmi status 10)")
        if code == _NOT_FOUND:
            return DeviceLostError(f"{what}: processor not found (amdsmi status 31)", device_id=device_id)
        if code == _DRIVER_NOT_LOADED:
            return DriverError(
                f"{what}: the amdgpu driver is not loaded (amdsmi status 34)",
                vendor_code=vendor_code,
                code="driver.not-loaded",
            )
        if code in _FAIL_LOAD:
            return LibraryNotFoundError(f"{what}: amdsmi could not load a module or symbol ({code})",
                                        vendor_code=vendor_code)
        return DriverError(msg, vendor_code=vendor_code)
    if param_exc is not None and isinstance(exc, param_exc):
        return DriverError(f"{what}: amdsmi rejected an argument ({exc})", vendor_code="amd.smi:parameter")
    return DriverError(f"{what} failed: {type(exc).__name__}: {exc}")


def _num(value: Any) -> float | None:
    """A number from an amdsmi slot: ``"N/A"``, negatives and all-ones sentinels are ``None``."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if not isinstance(value, int | float):
        return None
    if value < 0 or value in (0xFFFF, 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF):
        return None
    return float(value)


def _int(value: Any) -> int | None:
    # Exact for 64-bit ids (a float would round an xGMI hive id).
    if isinstance(value, int) and not isinstance(value, bool):
        return value if value >= 0 and value not in (0xFFFF, 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF) else None
    if isinstance(value, str) and value.strip().isdigit():
        return _int(int(value.strip()))
    num = _num(value)
    return int(num) if num is not None else None


def _str(value: Any) -> str | None:
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if not isinstance(value, str):
        return None
    text = value.strip().rstrip("\x00")
    return text if text and text.upper() not in ("N/A", "NA") else None


def _hex4(value: Any) -> str | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:04x}" if 0 <= value <= 0xFFFF else None
    text = _str(value)
    if text is None:
        return None
    try:
        num = int(text, 16)
    except ValueError:
        return None
    return f"{num:04x}" if 0 <= num <= 0xFFFF else None


def _enum_name(value: Any) -> str:
    name = getattr(value, "name", None)
    return str(name if name is not None else value)


class AmdSmiReader:
    """Reads one amdsmi session.  Never lets an amdsmi exception out: all become accel errors."""

    def __init__(self, module: ModuleType) -> None:
        self._m = module
        self._open = False
        #: amdsmi calls made so far (cumulative), for the conformance kit's cost rows.
        self.calls = 0

    # -- lifecycle --------------------------------------------------------------------------
    def open(self) -> None:
        """``amdsmi_init(INIT_AMD_GPUS)``; raises an accel DriverError family error."""
        flags = getattr(getattr(self._m, "AmdSmiInitFlags", None), "INIT_AMD_GPUS", 2)
        self._call("amdsmi_init", flags)
        self._open = True

    def close(self) -> None:
        if self._open:
            self._open = False
            with contextlib.suppress(AccelError):
                self._call("amdsmi_shut_down")

    def handles(self) -> list[Any]:
        """Processor handles (one per partition in CPX mode), in enumeration order."""
        value = self._call("amdsmi_get_processor_handles")
        return list(value) if isinstance(value, list | tuple) else []

    # -- plumbing ---------------------------------------------------------------------------
    def has(self, fn: str) -> bool:
        """Whether this amdsmi has the function ``fn`` (versions differ)."""
        return callable(getattr(self._m, fn, None))

    def call(self, fn: str, *args: Any) -> Any:
        """One amdsmi call with its exception mapped to :mod:`accel.errors` (for :mod:`._carve`)."""
        return self._call(fn, *args)

    def member(self, enum: str, name: str) -> Any:
        """``amdsmi.<enum>.<name>`` (``None`` when this amdsmi lacks it)."""
        return self._enum(enum, name)

    def _call(self, fn: str, *args: Any) -> Any:
        func: Callable[..., Any] | None = getattr(self._m, fn, None)
        self.calls += 1
        if func is None:
            raise NotSupportedError(f"{fn} is not in this amdsmi version")
        try:
            return func(*args)
        except Exception as exc:  # the boundary: every amdsmi error is mapped here
            raise map_amdsmi_error(self._m, exc, fn) from exc

    def _try(self, r: GpuReading, part: str, fn: str, *args: Any) -> Any:
        """Call ``fn``; ``None`` on "not supported" (remembered) or any other error (noted)."""
        try:
            return self._call(fn, *args)
        except NotSupportedError:
            r.not_supported.add(part)
        except AccelError as exc:
            r.errors[part] = str(exc)
        return None

    def _enum(self, enum: str, member: str) -> Any:
        return getattr(getattr(self._m, enum, None), member, None)

    # -- reading ----------------------------------------------------------------------------
    def read(self, handle: Any, index: int) -> GpuReading:
        """Everything amdsmi says about one handle.  Raises only when identity is unreadable."""
        r = GpuReading(index=index)
        bdf = self._call("amdsmi_get_gpu_device_bdf", handle)
        bus = _str(bdf)
        if bus is None:
            raise DriverError(f"amdsmi_get_gpu_device_bdf returned {bdf!r} for handle {index}")
        from accel.model import normalize_bus_id

        r.bus_id = normalize_bus_id(bus)
        self._identity(handle, r)
        self._memory(handle, r)
        self._power_thermal(handle, r)
        self._topology(handle, r)
        self._ras(handle, r)
        self._partitions(handle, r)
        self._processes(handle, r)
        for f in ("name", "unique_id", "uuid", "memory_total_bytes"):
            if getattr(r, f) is not None:
                r.sources[f] = _LAYER
        return r

    def _identity(self, h: Any, r: GpuReading) -> None:
        asic = self._try(r, "name", "amdsmi_get_gpu_asic_info", h)
        if isinstance(asic, dict):
            r.name = _str(asic.get("market_name"))
            r.vendor_id = _hex4(asic.get("vendor_id"))
            r.pci_device_id = _hex4(asic.get("device_id"))
            rev = _hex4(asic.get("rev_id"))
            r.pci_revision = f"0x{int(rev, 16):02x}" if rev is not None and int(rev, 16) <= 0xFF else None
            r.subsystem_id = _hex4(asic.get("subsystem_id"))
            r.unique_id = normalize_unique_id(asic.get("asic_serial"))
            r.compute_units = _int(asic.get("num_compute_units"))
            isa = _str(asic.get("target_graphics_version"))
            r.isa = isa if isa and isa.startswith("gfx") else None
        uuid = _str(self._try(r, "uuid", "amdsmi_get_gpu_device_uuid", h))
        r.uuid = uuid
        board = self._try(r, "serial_number", "amdsmi_get_gpu_board_info", h)
        if isinstance(board, dict):
            r.serial_number = _str(board.get("product_serial"))
        driver = self._try(r, "driver_version", "amdsmi_get_gpu_driver_info", h)
        if isinstance(driver, dict):
            r.driver_version = _str(driver.get("driver_version"))
        vbios = self._try(r, "vbios_version", "amdsmi_get_gpu_vbios_info", h)
        if isinstance(vbios, dict):
            r.vbios_version = _str(vbios.get("version"))
        fw = self._try(r, "firmware", "amdsmi_get_fw_info", h)
        if isinstance(fw, dict):
            for entry in fw.get("fw_list", ()) or ():
                if not isinstance(entry, dict):
                    continue
                name = _enum_name(entry.get("fw_name", entry.get("fw_id", "")))
                name = name.removeprefix("AMDSMI_").removeprefix("FW_ID_").lower()
                version = entry.get("fw_version")
                text = _str(version) if not isinstance(version, int) else str(version)
                if name and text:
                    r.firmware[name] = text
        if r.vbios_version:
            r.firmware.setdefault("vbios", r.vbios_version)
        pcie = self._try(r, "pcie", "amdsmi_get_pcie_info", h)
        if isinstance(pcie, dict):
            static = pcie.get("pcie_static") or {}
            metric = pcie.get("pcie_metric") or {}
            if isinstance(static, dict):
                r.pcie_width_max = _int(static.get("max_pcie_width")) or None
                r.pcie_gen_max = _int(static.get("pcie_interface_version")) or None
                slot = static.get("slot_type")
                slot_name = _enum_name(slot).upper() if slot is not None else ""
                if "OAM" in slot_name or slot == 1:
                    r.form_factor = "oam"
                elif "PCIE" in slot_name or "CEM" in slot_name or slot in (0, 2):
                    r.form_factor = "pcie"
            if isinstance(metric, dict):
                r.pcie_width_current = _int(metric.get("pcie_width")) or None
                r.pcie_replay_total = _int(metric.get("pcie_replay_count"))
        clk_type = self._enum("AmdSmiClkType", "GFX")
        if clk_type is not None:
            clk = self._try(r, "max_clock_hertz", "amdsmi_get_clock_info", h, clk_type)
            if isinstance(clk, dict):
                mx = _num(clk.get("max_clk"))
                cur = _num(clk.get("clk"))
                r.max_clock_hertz = mx * 1e6 if mx else None
                if cur is not None:
                    r.clocks_hertz["gfx"] = cur * 1e6
        mem_clk_type = self._enum("AmdSmiClkType", "MEM")
        if mem_clk_type is not None:
            clk = self._try(r, "memory_max_clock_hertz", "amdsmi_get_clock_info", h, mem_clk_type)
            if isinstance(clk, dict):
                mx = _num(clk.get("max_clk"))
                cur = _num(clk.get("clk"))
                r.memory_max_clock_hertz = mx * 1e6 if mx else None
                if cur is not None:
                    r.clocks_hertz["memory"] = cur * 1e6

    def _memory(self, h: Any, r: GpuReading) -> None:
        vram = self._enum("AmdSmiMemoryType", "VRAM")
        if vram is not None:
            r.memory_total_bytes = _int(self._try(r, "memory_total_bytes", "amdsmi_get_gpu_memory_total", h, vram))
            r.memory_used_bytes = _int(self._try(r, "memory_used_bytes", "amdsmi_get_gpu_memory_usage", h, vram))
        info = self._try(r, "memory_generation", "amdsmi_get_gpu_vram_info", h)
        if isinstance(info, dict):
            vtype = _enum_name(info.get("vram_type", "")).upper().removeprefix("AMDSMI_VRAM_TYPE_")
            vtype = vtype.removeprefix("VRAM_TYPE_")
            if vtype.startswith("HBM"):
                r.memory_kind, r.memory_generation = "hbm", vtype
            elif vtype.startswith("GDDR"):
                r.memory_kind, r.memory_generation = "gddr", vtype
            elif vtype.startswith("DDR"):
                r.memory_kind, r.memory_generation = "ddr", vtype
            r.memory_bus_width_bits = _int(info.get("vram_bit_width")) or None
        activity = self._try(r, "utilization", "amdsmi_get_gpu_activity", h)
        if isinstance(activity, dict):
            gfx = _num(activity.get("gfx_activity"))
            umc = _num(activity.get("umc_activity"))
            r.utilization_ratio = min(gfx, 100.0) / 100.0 if gfx is not None else None
            r.memory_utilization_ratio = min(umc, 100.0) / 100.0 if umc is not None else None

    def _power_thermal(self, h: Any, r: GpuReading) -> None:
        power = self._try(r, "power", "amdsmi_get_power_info", h)
        if isinstance(power, dict):
            for key in ("current_socket_power", "average_socket_power", "socket_power"):
                watts = _num(power.get(key))
                if watts:
                    r.power_watts = watts
                    break
        cap = self._try(r, "power_cap_watts", "amdsmi_get_power_cap_info", h)
        if isinstance(cap, dict):
            # amdsmi reports caps in microwatts (amdsmi_power_cap_info_t); the model wants watts.
            for attr, key in (
                ("power_cap_watts", "power_cap"),
                ("power_cap_default_watts", "default_power_cap"),
                ("power_cap_min_watts", "min_power_cap"),
                ("power_cap_max_watts", "max_power_cap"),
            ):
                uw = _num(cap.get(key))
                setattr(r, attr, uw / 1e6 if uw else None)
        ttype = getattr(self._m, "AmdSmiTemperatureType", None)
        tmetric = getattr(self._m, "AmdSmiTemperatureMetric", None)
        if ttype is not None and tmetric is not None:
            for label, member in (("edge", "EDGE"), ("junction", "HOTSPOT"), ("memory", "VRAM")):
                sensor = getattr(ttype, member, None)
                if sensor is None:
                    continue
                value = _num(self._try(r, f"temperature.{label}", "amdsmi_get_temp_metric", h, sensor,
                                       tmetric.CURRENT))
                if value is not None:
                    r.temperatures_celsius[label] = value
            hotspot = getattr(ttype, "HOTSPOT", None)
            if hotspot is not None:
                crit = _num(self._try(r, "temp_slowdown_celsius", "amdsmi_get_temp_metric", h, hotspot,
                                      tmetric.CRITICAL))
                emerg = _num(self._try(r, "temp_shutdown_celsius", "amdsmi_get_temp_metric", h, hotspot,
                                       tmetric.EMERGENCY))
                r.temp_slowdown_celsius = crit or None
                r.temp_shutdown_celsius = emerg or None
        violation = self._try(r, "throttle_reasons", "amdsmi_get_violation_status", h)
        if isinstance(violation, dict):
            reasons = tuple(
                name for key, name in _VIOLATIONS.items() if violation.get(key) is True or violation.get(key) == 1
            )
            r.throttle_reasons = reasons

    def _topology(self, h: Any, r: GpuReading) -> None:
        numa = self._try(r, "numa_node", "amdsmi_topo_get_numa_node_number", h)
        r.numa_node = numa if isinstance(numa, int) and not isinstance(numa, bool) and numa >= 0 else None
        xgmi = self._try(r, "xgmi", "amdsmi_get_xgmi_info", h)
        if isinstance(xgmi, dict):
            hive = _int(xgmi.get("xgmi_hive_id"))
            r.xgmi_hive_id = f"0x{hive:x}" if hive else None
            r.xgmi_node_id = _int(xgmi.get("xgmi_node_id"))
        status = self._try(r, "xgmi_link_status", "amdsmi_get_gpu_xgmi_link_status", h)
        if isinstance(status, dict) and isinstance(status.get("status"), list | tuple):
            links = tuple(str(s).upper() for s in status["status"] if str(s).upper() in ("U", "D", "X"))
            total = _int(status.get("total_links"))
            r.xgmi_link_status = links[:total] if total is not None else links
        err = self._try(r, "xgmi_error_status", "amdsmi_gpu_xgmi_error_status", h)
        code = _int(_enum_value(err))
        r.xgmi_error_status = code if code in (0, 1, 2) else None

    def _ras(self, h: Any, r: GpuReading) -> None:
        enabled = self._try(r, "ecc_enabled", "amdsmi_get_gpu_ecc_enabled", h)
        mask = _int(enabled)
        if mask is not None:
            r.ecc_enabled = mask != 0
            r.ecc_supported = mask != 0 or None
        total = self._try(r, "ecc_total", "amdsmi_get_gpu_total_ecc_count", h)
        if isinstance(total, dict):
            r.ecc_total = EccCount(
                correctable=_int(total.get("correctable_count")),
                uncorrectable=_int(total.get("uncorrectable_count")),
                deferred=_int(total.get("deferred_count")),
            )
            r.ecc_supported = True
        block_enum = getattr(self._m, "AmdSmiGpuBlock", None)
        if block_enum is not None and r.ecc_enabled:
            for name in _BLOCKS:
                block = getattr(block_enum, name, None)
                if block is None or not (mask or 0) & int(block):
                    continue
                count = self._try(r, f"ecc.{name}", "amdsmi_get_gpu_ecc_count", h, block)
                if isinstance(count, dict):
                    r.ecc_blocks[name] = EccCount(
                        correctable=_int(count.get("correctable_count")),
                        uncorrectable=_int(count.get("uncorrectable_count")),
                        deferred=_int(count.get("deferred_count")),
                    )
                state = self._try(r, f"ras.{name}", "amdsmi_get_gpu_ecc_status", h, block)
                if state is not None:
                    st = _enum_name(state).upper().removeprefix("AMDSMI_RAS_ERR_STATE_")
                    if st not in ("NONE", "INVALID", "ENABLED"):
                        r.ras_states[name] = st
        pages = self._try(r, "bad_pages", "amdsmi_get_gpu_bad_page_info", h)
        if isinstance(pages, str) and "no bad pages" in pages.lower():
            r.bad_pages = ()  # amdsmi answers a sentence, not an empty list
        elif isinstance(pages, list | tuple):
            out = []
            for p in pages:
                if not isinstance(p, dict):
                    continue
                addr = _int(p.get("page_address"))
                status = _PAGE_STATUS.get(_int(_enum_value(p.get("status"))) or 0, "reserved")
                if addr is not None:
                    out.append(BadPage(addr, _int(p.get("page_size")), status))
            r.bad_pages = tuple(out)
        threshold = _int(self._try(r, "bad_page_threshold", "amdsmi_get_gpu_bad_page_threshold", h))
        r.bad_page_threshold = threshold or None

    def _partitions(self, h: Any, r: GpuReading) -> None:
        cp = _str(self._try(r, "compute_partition", "amdsmi_get_gpu_compute_partition", h))
        mp = _str(self._try(r, "memory_partition", "amdsmi_get_gpu_memory_partition", h))
        r.compute_partition = cp.upper() if cp else None
        r.memory_partition = mp.upper() if mp else None
        kfd = self._try(r, "partition_index", "amdsmi_get_gpu_kfd_info", h)
        if isinstance(kfd, dict):
            r.partition_index = _int(kfd.get("current_partition_id"))
        enum = self._try(r, "render_node", "amdsmi_get_gpu_enumeration_info", h)
        if isinstance(enum, dict):
            render = _int(enum.get("drm_render"))
            card = _int(enum.get("drm_card"))
            r.render_node = f"renderD{render}" if render is not None else None
            r.card_node = f"card{card}" if card is not None else None

    def _processes(self, h: Any, r: GpuReading) -> None:
        procs = self._try(r, "processes", "amdsmi_get_gpu_process_list", h)
        if not isinstance(procs, list | tuple):
            return
        out = []
        for p in procs:
            if not isinstance(p, dict):
                continue
            pid = _int(p.get("pid"))
            if pid is None:
                continue
            raw_usage = p.get("memory_usage")
            usage: dict[str, Any] = raw_usage if isinstance(raw_usage, dict) else {}
            out.append(ProcessReading(pid=pid, name=_str(p.get("name")), vram_bytes=_int(usage.get("vram_mem"))))
        r.processes = tuple(out)

    def link(self, a: Any, b: Any) -> tuple[int | None, int | None] | None:
        """``(hops, type)`` between two handles (type 2 = xGMI, 1 = PCIe); ``None`` if unreadable."""
        try:
            value = self._call("amdsmi_topo_get_link_type", a, b)
        except AccelError:
            return None
        if not isinstance(value, dict):
            return None
        return _int(value.get("hops")), _int(_enum_value(value.get("type")))


def _enum_value(value: Any) -> Any:
    inner = getattr(value, "value", None)
    return inner if isinstance(inner, int) else value
