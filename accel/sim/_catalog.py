"""What each simulated product can be cut into: MIG profiles, AMD modes, Ascend vNPU templates.

Sources (facts only; the numbers are the vendors' published ones):

* MIG: NVIDIA's MIG user guide, "Supported MIG Profiles"
  (https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html): the
  profile names, instance counts and SM / memory fractions of A100-40GB, A100-80GB and H100-80GB.
  A profile ``Ng.Mgb`` takes ``N`` of 7 compute slices and a fixed number of the 8 memory slices;
  it may only start at the slots listed (the placements ``nvidia-smi mig -lgipp`` prints: 1g at
  any slot 0-6, 1g.20gb / 2g at even slots, 3g at 0 or 4, 4g and 7g at 0).  Profile ids are
  NVML's ``NVML_GPU_INSTANCE_PROFILE_*`` values as ``nvidia-smi mig -lgip`` prints them (19, 15,
  14, 9, 5, 0).
* AMD: MI300X compute partitions SPX / DPX / QPX / CPX split its 8 XCDs into 1 / 2 / 4 / 8
  partitions (amdsmi ``amdsmi_accelerator_partition_profile_t.num_partitions``, ROCm docs
  docs-7.1.1); memory modes NPS1 / NPS4.  The legal pairs encoded here: every compute mode with
  NPS1, and NPS4 only with CPX (AMD's MI300X partitioning guide; QPX + NPS4 is not offered).
* Ascend: vNPU templates per chip (AI cores, AI CPUs, MiB) from the mind-cluster template lists
  and Huawei's CCE docs, as collected in shared/reference/native-and-partitions.md section 12;
  310P allows at most 7 vNPUs per chip, 910 chips 16.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["AMD_MODES", "ASCEND", "MIG", "AmdMode", "MigProfile", "VnpuTemplate", "mig_catalog", "vnpu_catalog"]

MIB = 1024 * 1024


@dataclass(frozen=True)
class MigProfile:
    name: str
    profile_id: int
    #: compute slices (the ``N`` of ``Ng``) of the parent's 7
    slices: int
    #: memory slices of the parent's 8 (the placement size)
    memory_slices: int
    memory_mib: int
    sm_count: int
    max_instances: int
    #: the slots a GPU instance of this profile may start at
    starts: tuple[int, ...]


def _mig(names: tuple[str, ...], mib: tuple[int, ...], sms: tuple[int, ...]) -> tuple[MigProfile, ...]:
    # (profile id, compute slices, memory slices, max instances, starts) in the order of ``names``
    shape = (
        (19, 1, 1, 7, (0, 1, 2, 3, 4, 5, 6)),
        (15, 1, 2, 4, (0, 2, 4, 6)),
        (14, 2, 2, 3, (0, 2, 4)),
        (9, 3, 4, 2, (0, 4)),
        (5, 4, 4, 1, (0,)),
        (0, 7, 8, 1, (0,)),
    )
    return tuple(
        MigProfile(name, pid, sl, ms, m, sm, mx, st)
        for name, m, sm, (pid, sl, ms, mx, st) in zip(names, mib, sms, shape, strict=True)
    )


#: Product (the start of the device model's tail, upper case) -> its GPU instance profiles.
MIG: dict[str, tuple[MigProfile, ...]] = {
    "A100-40GB": _mig(("1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"),
                      (4864, 9856, 9856, 19968, 19968, 40192), (14, 14, 28, 42, 56, 98)),
    "A100-80GB": _mig(("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
                      (9728, 19968, 19968, 40192, 40192, 81152), (14, 14, 28, 42, 56, 98)),
    "H100-80GB": _mig(("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
                      (9984, 20096, 20096, 40320, 40320, 80896), (16, 16, 32, 60, 64, 132)),
}


def mig_catalog(model: str, memory_bytes: int | None) -> tuple[MigProfile, ...]:
    """The MIG profiles of a device model (empty: not a MIG-capable product we know)."""
    upper = model.upper()
    big = memory_bytes is not None and memory_bytes > 60 * 1024**3
    if "A100" in upper:
        return MIG["A100-80GB" if big or "80GB" in upper else "A100-40GB"]
    if "H100" in upper and (big or "80GB" in upper):
        return MIG["H100-80GB"]
    return ()


@dataclass(frozen=True)
class AmdMode:
    """One legal compute x memory mode pair (``cpx_nps4``): ``count`` partitions of the device."""

    compute: str
    memory: str
    count: int

    @property
    def name(self) -> str:
        return f"{self.compute}_{self.memory}"


#: The MI300X pairs (see the module docstring).  SPX + NPS1 is the whole device: not a partition.
AMD_MODES: tuple[AmdMode, ...] = (
    AmdMode("dpx", "nps1", 2),
    AmdMode("qpx", "nps1", 4),
    AmdMode("cpx", "nps1", 8),
    AmdMode("cpx", "nps4", 8),
)
#: The compute and memory modes an MI300X knows at all (a pair outside AMD_MODES is illegal).
AMD_COMPUTE = ("spx", "dpx", "qpx", "cpx")
AMD_MEMORY = ("nps1", "nps4")


@dataclass(frozen=True)
class VnpuTemplate:
    name: str
    aicore: int
    aicpu: int | None
    memory_mib: int


@dataclass(frozen=True)
class VnpuChip:
    aicore: int
    memory_mib: int
    max_vnpus: int
    templates: tuple[VnpuTemplate, ...]


_T = VnpuTemplate
#: Chip name (as ``Ascend <chip>`` device models end) -> what it can be cut into.
ASCEND: dict[str, VnpuChip] = {
    "910A": VnpuChip(30, 32768, 16, (_T("vir01", 1, None, 1092), _T("vir02", 2, None, 2184),
                                     _T("vir04", 4, None, 4369), _T("vir08", 8, None, 8738),
                                     _T("vir16", 16, None, 17476))),
    "910B2": VnpuChip(24, 65536, 16, (_T("vir03_1c_8g", 3, 1, 8192), _T("vir06_1c_16g", 6, 1, 16384),
                                      _T("vir12_3c_32g", 12, 3, 32768))),
    "910B3": VnpuChip(20, 65536, 16, (_T("vir05_1c_16g", 5, 1, 16384), _T("vir10_3c_32g", 10, 3, 32768))),
    "910B4": VnpuChip(20, 32768, 16, (_T("vir05_1c_8g", 5, 1, 8192), _T("vir10_3c_16g", 10, 3, 16384))),
    "310P3": VnpuChip(8, 24576, 7, (_T("vir01", 1, 1, 3072), _T("vir02", 2, 2, 6144), _T("vir04", 4, 4, 12288))),
}


def vnpu_catalog(model: str) -> VnpuChip | None:
    """The vNPU templates of an Ascend device model (``None``: not one we know)."""
    upper = model.upper().replace(" ", "")
    for chip in sorted(ASCEND, key=len, reverse=True):
        if upper.endswith(chip) or f"ASCEND{chip}" in upper:
            return ASCEND[chip]
    if upper.endswith("ASCEND910"):
        return ASCEND["910A"]
    return None
