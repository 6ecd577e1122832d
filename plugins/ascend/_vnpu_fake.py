# ruff: noqa: UP031  -- the C printf formats of npu-smi, kept as written so they can be checked against its source
"""A faithful fake of ``npu-smi``'s vNPU commands, for tests: a :class:`~accel.tools.Runner`.

:class:`FakeVnpuNpuSmi` answers ``npu-smi info -t template-info [-i N]``, ``info -t info-vnpu
-i N -c C``, ``set -t create-vnpu ...`` and ``set -t destroy-vnpu ...`` from its own state and
hands every other command (``npu-smi info``, ``info -m``...) to an inner runner (a replay).  It
prints what the real tool prints, with the printf formats of npu-smi's source (repository
``verylucky01/driver``, commit ``e29d066fd6ee84cae705e2000a0387d721d3aaa0``, directory
``src/custom/dev_prod/user/npucli/src``: ``npu_chip_info.c`` ``printf_vnpu_free_resoure_info`` /
``printf_each_vnpu_info``, ``npu_info_print.c`` ``printf_template_info``, ``npu_chip_set.c``
``check_create_vnpu_param`` / ``set_chip_create_vdevice`` / ``set_chip_destroy_vdevice``,
``npu_set_print.c`` ``print_vnpu_mode_check_result``), and a test renders a real fixture's
state byte for byte.  The rules it enforces are that source's and the documentation's:

* the template must be one the chip's ``template-info`` lists (310P: vir01 ... vir04_4c_dvpp;
  910: vir02 / vir04 / vir08 / vir16; 910B by bin), else ``Error parameter of -f.``;
* vNPU mode must be docker (container) mode, else ``The vnpu is not in docker mode, does not
  support setting create-vnpu.`` with exit status 0 (the tool returns ``NPU_OK`` there);
* an NPU in SMP mode refuses (``NPU is working in SMP mode, does not support vnpu creation.``);
* the template's AI cores, AI CPUs (and on 310P / 910B the media engines) must be free, else
  ``Insufficient number of cores available, unallocated cores number:%f.`` (and the AICPU and
  DVPP forms);
* the vNPU id (``-v``) must lie in ``[phy_id*16 + 100, phy_id*16 + 107]`` (310P) or ``+115``
  (training chips) and be unused on the server (mind-cluster virtual_instance.md); an id not
  given takes the lowest free one;
* at most 7 vNPUs on a 310P chip, 16 on a training chip (mind-cluster virtual_instance.md);
* destroy needs an existing id (``Error parameter of -v.``) and, as the documentation requires
  ("ensure the device is not in use"), refuses one a container uses (``destroy vnpu N failed.``).

Exit statuses: npu-smi ends with ``exit(rc)`` and its codes are ``-9000 - k``
(``npu_smi.h``), so the shell sees ``rc & 0xff``: 215 for ``NPU_ERR_CODE_INVALID_PARAMETER``
(-9001), 217 for ``NPU_ERR_CODE_NOT_SUPPORT`` (-9255), 196 for
``NPU_ERR_CODE_RESOURCE_OCCUPIED`` (-9020).  Derived from the source, not observed.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from accel.tools import DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_TIMEOUT_S, Runner, StrPath, ToolResult

from ._vnpu_parse import VnpuTemplate

__all__ = ["FakeChip", "FakeVnpu", "FakeVnpuNpuSmi", "render_info_vnpu", "render_template_info"]

#: exit statuses (see the module docstring)
EXIT_INVALID_PARAMETER = (-9001) & 0xFF
EXIT_NOT_SUPPORT = (-9255) & 0xFF
EXIT_RESOURCE_OCCUPIED = (-9020) & 0xFF
UNSPECIFIED_VNPU_ID = 4294967295


@dataclass
class FakeVnpu:
    vnpu_id: int
    template: str
    vgroup_id: int
    container_id: int = 0
    in_use: bool = False


@dataclass
class FakeChip:
    """One chip's vNPU resources: totals, what the system keeps, the templates it offers."""

    npu_id: int
    chip_id: int
    phy_id: int
    #: "310P", "910" (Atlas training) or "910B": decides id range, DVPP check, 32/64 GiB rounding.
    family: str
    templates: tuple[VnpuTemplate, ...]
    aicore: int
    memory_gib: int
    #: GiB an idle chip shows as not free (60/64 on an idle 910B4-1, yet two 32 GiB vNPUs fit:
    #: the real chip then shows 0/64).  Shown only; a partly carved chip's real figure is unseen.
    memory_reserved_gib: int = 0
    aicpu: int = 0
    #: (free when idle, total) for the AICPU count: a 910B shows 6/6 idle, 1/7 once carved.
    aicpu_idle_free: int | None = None
    media: Mapping[str, int] = field(default_factory=dict)
    vnpus: dict[int, FakeVnpu] = field(default_factory=dict)

    @property
    def id_range(self) -> range:
        last = 107 if self.family == "310P" else 115
        return range(self.phy_id * 16 + 100, self.phy_id * 16 + last + 1)

    def template(self, name: str) -> VnpuTemplate | None:
        return next((t for t in self.templates if t.name == name), None)

    def used(self, attr: str) -> int:
        total = 0
        for v in self.vnpus.values():
            t = self.template(v.template)
            total += int(getattr(t, attr)) if t is not None else 0
        return total


_MEDIA = ("vpc", "venc", "vdec", "jpegd", "jpege")


def _free_total(free: int | None, total: int | None) -> str:
    return "NA/NA" if free is None or total is None else f"{free}/{total}"


def render_info_vnpu(chip: FakeChip) -> str:
    """``npu-smi info -t info-vnpu`` for ``chip`` (printf_vnpu_free_resoure_info and
    printf_each_vnpu_info of npu_chip_info.c)."""
    mem_free = chip.memory_gib - chip.memory_reserved_gib - chip.used("memory_gib")
    if chip.vnpus:
        aicpu_free: int | None = chip.aicpu - chip.used("aicpu")
        aicpu_total = chip.aicpu
    else:
        aicpu_free = chip.aicpu_idle_free if chip.aicpu_idle_free is not None else chip.aicpu
        aicpu_total = aicpu_free
    cells = [
        _free_total(chip.aicore - chip.used("aicore"), chip.aicore),
        _free_total(max(mem_free, 0), chip.memory_gib),
        _free_total(aicpu_free, aicpu_total),
        *(
            _free_total(chip.media[m] - chip.used(m), chip.media[m]) if m in chip.media else "NA/NA"
            for m in ("vpc", "venc", "vdec", "jpegd", "jpege")
        ),
        "NA/NA",  # PNGD: not supported by the query
    ]
    rule = "+-------------------------------------------------------------------------------+\n"
    out = [
        rule,
        "| NPU resource static info as follow:                                           |\n",
        "| Format:Free/Total                   NA: Currently, query is not supported.    |\n",
        "| AICORE    Memory    AICPU    VPC    VENC    VDEC    JPEGD    JPEGE    PNGD    |\n",
        "|            GB                                                                 |\n",
        "|===============================================================================|\n",
        "| %-9s %-9s %-8s %-6s %-7s %-7s %-8s %-8s %-8s|\n" % tuple(cells),
        rule,
        "| Total number of vnpu: %-2u                                                      |\n" % len(chip.vnpus),
        rule,
        "|  Vnpu ID  |  Vgroup ID     |  Container ID  |  Status  |  Template Name       |\n",
    ]
    for v in sorted(chip.vnpus.values(), key=lambda v: v.vnpu_id):
        out.append(rule)
        out.append(
            "|  %-4u     |  %-12s  |  %-12s  |  %-2s      |  %-15s     |\n"
            % (v.vnpu_id, "%-12u" % v.vgroup_id, "%012x" % v.container_id, "%-2u" % int(v.in_use), "%-15s" % v.template)
        )
    out.append(rule)
    return "".join(out)


def render_template_info(templates: Sequence[VnpuTemplate]) -> str:
    """``npu-smi info -t template-info`` (printf_template_info of npu_info_print.c)."""
    rule = "+------------------------------------------------------------------------------------------+\n"
    out = [
        rule,
        "|NPU instance template info is:                                                            |\n",
        "|Name                AICORE    Memory    AICPU     VPC            VENC           JPEGD     |\n",
        "|                               GB                 PNGD           VDEC           JPEGE     |\n",
        "|==========================================================================================|\n",
    ]
    for t in templates:
        out.append(
            "|%-19s %-9u %-9u %-9s %-14d %-14d %-10d|\n"
            % (t.name, t.aicore, t.memory_gib, "%g" % t.aicpu, t.vpc, t.venc, t.jpegd)
        )
        out.append("|%-49s %-14s %-14d %-10d|\n" % (" ", "%g" % t.pngd, t.vdec, t.jpege))
        out.append(rule)
    return "".join(out)


def _status_ok(message: str) -> str:
    return "\t%-30s : %s\n\t%-30s : %s\n" % ("Status", "OK", "Message", message)


class FakeVnpuNpuSmi:
    """``npu-smi``'s vNPU commands over ``chips``; everything else goes to ``inner``.

    ``mode`` is the vnpu-mode (``"docker"`` or ``"vm"``), ``smp`` whether the NPU works in SMP
    mode.  :meth:`attach` / :meth:`detach` mark a vNPU used by a container (Status 1).
    ``fail_create`` makes the next create fail in the DCMI call (``create vnpu failed.``), and
    ``leave_behind`` makes that failed create still leave its vNPU (a half-made instance).
    ``hang`` makes the next vNPU command hang past its timeout.
    """

    def __init__(self, inner: Runner, chips: Sequence[FakeChip], *, mode: str = "docker", smp: bool = False) -> None:
        self.inner = inner
        self.chips = {(c.npu_id, c.chip_id): c for c in chips}
        self.mode = mode
        self.smp = smp
        self.fail_create = False
        self.leave_behind = False
        self.hang = False
        self.calls: list[tuple[str, ...]] = []

    # -- the Runner protocol ------------------------------------------------------------------
    def which(self, name: str, search_path: Sequence[str] = ()) -> str | None:
        return self.inner.which(name, search_path)

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
        env: Mapping[str, str] | None = None,
        search_path: Sequence[str] = (),
        cwd: StrPath | None = None,
        check: bool = True,
    ) -> ToolResult:
        args = tuple(argv)
        opts = _options(args[1:])
        kind = opts.get("-t")
        if (
            len(args) < 2
            or args[1] not in ("info", "set")
            or kind not in ("template-info", "info-vnpu", "create-vnpu", "destroy-vnpu")
        ):
            return self.inner.run(
                argv,
                timeout_s=timeout_s,
                max_output_bytes=max_output_bytes,
                env=env,
                search_path=search_path,
                cwd=cwd,
                check=check,
            )
        self.calls.append(args)
        start = time.monotonic()
        if self.hang:
            self.hang = False
            from accel.errors import ToolTimeoutError

            raise ToolTimeoutError(
                f"{' '.join(args)} timed out after {timeout_s:g} s (fake hang)", tool="npu-smi", argv=args
            )
        if kind == "template-info":
            out, rc = self._template_info(opts)
        elif kind == "info-vnpu":
            out, rc = self._info_vnpu(opts)
        elif kind == "create-vnpu":
            out, rc = self._create(opts)
        else:
            out, rc = self._destroy(opts)
        result = ToolResult(argv=args, stdout=out, stderr="", returncode=rc, duration_s=time.monotonic() - start)
        return result.check() if check else result

    # -- state helpers ------------------------------------------------------------------------
    def attach(self, vnpu_id: int, container_id: int = 0xFFFFFFFFFFFF) -> None:
        v = self._find(vnpu_id)
        v.in_use, v.container_id = True, container_id

    def detach(self, vnpu_id: int) -> None:
        v = self._find(vnpu_id)
        v.in_use, v.container_id = False, 0

    def _find(self, vnpu_id: int) -> FakeVnpu:
        for chip in self.chips.values():
            if vnpu_id in chip.vnpus:
                return chip.vnpus[vnpu_id]
        raise KeyError(vnpu_id)

    def _chip(self, opts: Mapping[str, str]) -> FakeChip | None:
        try:
            return self.chips.get((int(opts.get("-i", "")), int(opts.get("-c", "0"))))
        except ValueError:
            return None

    # -- the commands -------------------------------------------------------------------------
    def _template_info(self, opts: Mapping[str, str]) -> tuple[str, int]:
        if "-i" in opts:
            chips = [c for c in self.chips.values() if str(c.npu_id) == opts["-i"]]
        else:
            chips = list(self.chips.values())[:1]
        if not chips:
            return "Error parameter of -i.\n", EXIT_INVALID_PARAMETER
        return render_template_info(chips[0].templates), 0

    def _info_vnpu(self, opts: Mapping[str, str]) -> tuple[str, int]:
        chip = self._chip(opts)
        if chip is None:
            return "Error parameter of -i or -c.\n", EXIT_INVALID_PARAMETER
        if self.mode != "docker":
            return "The vnpu is not in docker mode, does not support querying info-vnpu.\n", 0
        if self.smp:
            return "NPU is working in SMP mode, does not support vnpu query.\n", EXIT_NOT_SUPPORT
        return render_info_vnpu(chip), 0

    def _create(self, opts: Mapping[str, str]) -> tuple[str, int]:
        chip = self._chip(opts)
        if chip is None:
            return "Error parameter of -i or -c.\n", EXIT_INVALID_PARAMETER
        tmpl = chip.template(opts.get("-f", ""))
        if tmpl is None:
            return "Error parameter of -f.\n", EXIT_INVALID_PARAMETER
        if self.mode != "docker":
            return "The vnpu is not in docker mode, does not support setting create-vnpu.\n", 0
        if self.smp:
            return "NPU is working in SMP mode, does not support vnpu creation.\n", EXIT_NOT_SUPPORT
        free_cores = chip.aicore - chip.used("aicore")
        if tmpl.aicore > free_cores:
            return (
                f"Insufficient number of cores available, unallocated cores number:{float(free_cores):f}.\n",
                EXIT_NOT_SUPPORT,
            )
        free_aicpu = chip.aicpu - chip.used("aicpu")
        if tmpl.aicpu > free_aicpu:
            return f"Insufficient number of AICPU available, unallocated AICPU number:{free_aicpu}.\n", EXIT_NOT_SUPPORT
        if (
            chip.family in ("310P", "910B")
            and chip.media
            and any(getattr(tmpl, m) > chip.media.get(m, 0) - chip.used(m) for m in _MEDIA)
        ):
            free = [float(chip.media.get(m, 0) - chip.used(m)) for m in _MEDIA]
            return (
                "Insufficient number of DVPP available, unallocated DVPP number:\n"
                "VPC:%f, VENC:%f, VDEC:%f, JPEGD:%f, JPEGE:%f.\n" % tuple(free)
            ), EXIT_NOT_SUPPORT
        if chip.memory_gib - chip.used("memory_gib") < tmpl.memory_gib:
            return "create vnpu failed.\n", EXIT_RESOURCE_OCCUPIED
        if len(chip.vnpus) >= (7 if chip.family == "310P" else 16):
            return "create vnpu failed.\n", EXIT_RESOURCE_OCCUPIED
        taken = {vid for c in self.chips.values() for vid in c.vnpus}
        raw = opts.get("-v")
        if raw is None or raw == str(UNSPECIFIED_VNPU_ID):
            vid = next((v for v in chip.id_range if v not in taken), None)
        else:
            vid = int(raw) if raw.isdigit() else None
            if vid is not None and (vid not in chip.id_range or vid in taken):
                vid = None
        if vid is None:
            return "create vnpu failed.\n", EXIT_INVALID_PARAMETER
        vgroup = int(opts["-g"]) if opts.get("-g", "").isdigit() else len(chip.vnpus)
        if self.fail_create:
            self.fail_create = False
            if self.leave_behind:
                self.leave_behind = False
                chip.vnpus[vid] = FakeVnpu(vid, tmpl.name, vgroup)
            return "create vnpu failed.\n", EXIT_RESOURCE_OCCUPIED
        chip.vnpus[vid] = FakeVnpu(vid, tmpl.name, vgroup)
        return _status_ok("Create vnpu success"), 0

    def _destroy(self, opts: Mapping[str, str]) -> tuple[str, int]:
        chip = self._chip(opts)
        if chip is None:
            return "Error parameter of -i or -c.\n", EXIT_INVALID_PARAMETER
        if self.mode != "docker":
            return "The vnpu is not in docker mode, does not support setting destroy-vnpu.\n", 0
        raw = opts.get("-v", "")
        vid = int(raw) if raw.isdigit() else -1
        if vid not in chip.vnpus:
            return "Error parameter of -v.\n", EXIT_INVALID_PARAMETER
        if chip.vnpus[vid].in_use:
            return f"destroy vnpu {vid} failed.\n", EXIT_RESOURCE_OCCUPIED
        del chip.vnpus[vid]
        return _status_ok(f"Destroy vnpu {vid} success"), 0


def _options(args: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for k in range(len(args) - 1):
        if args[k].startswith("-") and not args[k + 1].startswith("-"):
            out[args[k]] = args[k + 1]
    return out
