"""The amdgpu driver's compute / memory partition rules, as the fake amdsmi enforces them.

Facts (not code) from the driver and the library; each is cited where it is used:

* ``aqua_vanjaram.c`` (the MI300 partition manager; ROCm/amdgpu
  ``drivers/gpu/drm/amd/amdgpu/aqua_vanjaram.c`` at 1c5625e6e140f925e7bd040f2c83c294e92806fb):

  - the compute modes a part supports follow its XCC count: 8 -> SPX, DPX, QPX, CPX; 6 (MI300A)
    -> SPX, TPX, CPX; 4 -> SPX, DPX, CPX (``__aqua_vanjaram_update_supported_modes``);
  - a compute mode is valid only under some memory modes, the current one counted in NUMA
    partitions (``__aqua_vanjaram_is_valid_mode``): SPX needs 1, DPX at most 2, TPX 1 or 3 (and
    XCCs divisible by 3), QPX 1 or 4 (and 2+ XCCs each), CPX more than 1 XCC and the XCCs
    divisible by the partitions;
  - the memory modes compatible with each compute mode (``aqua_vanjaram_get_xcp_res_info``):
    SPX NPS1; DPX NPS1, NPS2; TPX, QPX and CPX NPS1, NPS4; intersected with the product's own;
  - a compute switch locks KFD first (``amdgpu_amdkfd_check_and_lock_kfd``), which refuses
    while processes hold the device: ``EBUSY``;
  - after a memory-mode change the driver reloads and, if the compute mode no longer fits,
    takes the automatic one (``__aqua_vanjaram_get_auto_mode``): 1 partition -> SPX, as many
    as XCCs or half as many -> CPX on a discrete GPU, 2 -> DPX.

* ``rocm_smi.cc`` (ROCm/amdsmi ``rocm_smi/src/rocm_smi.cc`` at
  0ceca28f4139dced5e9b5739a3f393780d7add48), which ``amdsmi_set_gpu_*_partition`` wrap:

  - both setters need root (``AMDSMI_STATUS_NO_PERM``); an ``INVALID`` / ``UNKNOWN`` value is
    ``INVAL``; a compute mode the device does not list as available is
    ``AMDSMI_STATUS_SETTING_UNAVAILABLE``; setting the current mode again does nothing;
  - the memory setter is only for discrete MI*00X boards (else ``NOT_SUPPORTED``); it rewrites
    the mode and restarts the amdgpu driver, answering ``AMDSMI_STATUS_AMDGPU_RESTART_ERR`` when
    the restart fails (the driver cannot unload while processes use it);
  - sysfs write errors map ``EBUSY`` -> ``AMDSMI_STATUS_BUSY`` (``ErrnoToRsmiStatus``).
"""

from __future__ import annotations

__all__ = ["SUPPORTED_BY_XCC", "auto_compute", "compatible_memory", "compute_valid", "nps_count", "xcp_count"]

#: compute modes by XCC count (``__aqua_vanjaram_update_supported_modes``)
SUPPORTED_BY_XCC: dict[int, tuple[str, ...]] = {
    8: ("SPX", "DPX", "QPX", "CPX"),
    6: ("SPX", "TPX", "CPX"),
    4: ("SPX", "DPX", "CPX"),
    2: ("SPX", "CPX"),
    1: ("SPX", "CPX"),
}

#: memory modes compatible with each compute mode (``aqua_vanjaram_get_xcp_res_info``)
_COMPATIBLE: dict[str, tuple[str, ...]] = {
    "SPX": ("NPS1",),
    "DPX": ("NPS1", "NPS2"),
    "TPX": ("NPS1", "NPS4"),
    "QPX": ("NPS1", "NPS4"),
    "CPX": ("NPS1", "NPS4"),
}


def nps_count(memory: str) -> int:
    """The NUMA partitions of a memory mode (``NPS4`` -> 4)."""
    return int(memory.upper().removeprefix("NPS"))


def xcp_count(compute: str, num_xcc: int) -> int:
    """How many partitions (logical GPUs) a compute mode makes of ``num_xcc`` XCCs."""
    return {"SPX": 1, "DPX": 2, "TPX": 3, "QPX": 4}.get(compute.upper(), num_xcc)


def compute_valid(compute: str, memory: str, num_xcc: int) -> bool:
    """Whether the driver accepts compute mode ``compute`` while in memory mode ``memory``."""
    nps = nps_count(memory)
    mode = compute.upper()
    if mode not in SUPPORTED_BY_XCC.get(num_xcc, ()):
        return False
    if mode == "SPX":
        return nps == 1
    if mode == "DPX":
        return nps <= 2 and num_xcc % 4 == 0
    if mode == "TPX":
        return nps in (1, 3) and num_xcc % 3 == 0
    if mode == "QPX":
        return nps in (1, 4) and num_xcc // 4 >= 2
    return num_xcc > 1 and num_xcc % nps == 0  # CPX


def compatible_memory(compute: str, supported: tuple[str, ...]) -> tuple[str, ...]:
    """The memory modes of ``supported`` (the product's) that fit compute mode ``compute``."""
    return tuple(m for m in _COMPATIBLE.get(compute.upper(), ()) if m in supported)


def auto_compute(memory: str, num_xcc: int) -> str | None:
    """The compute mode the driver takes after a reload into ``memory`` (discrete GPU)."""
    nps = nps_count(memory)
    if nps == 1:
        return "SPX"
    if nps in (num_xcc, num_xcc // 2):
        return "CPX"
    if nps == 2:
        return "DPX"
    return None
