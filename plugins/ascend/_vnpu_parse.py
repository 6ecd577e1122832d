"""Pure parsers for the ``npu-smi`` vNPU views: text in, plain records out.

* ``npu-smi info -t template-info [-i N]`` (:func:`parse_template_info`): one block of two rows
  per template; the first row is ``Name AICORE Memory(GB) AICPU VPC VENC JPEGD``, the second
  ``PNGD VDEC JPEGE``.  Memory is whole GiB (the tool prints ``mem_size_MB >> 10``).
* ``npu-smi info -t info-vnpu -i N -c C`` (:func:`parse_info_vnpu`): the chip's free / total
  resources (``Free/Total`` cells, ``NA/NA`` where not supported), ``Total number of vnpu``,
  and one row per vNPU: Vnpu ID, Vgroup ID, Container ID (12 hex digits, ``ffffffffffff`` when
  held by an unnamed container), Status (1: a container uses it, 0: free), Template Name.
* ``npu-smi set -t create-vnpu`` / ``destroy-vnpu`` (:func:`parse_set_result`): ``Status : OK``
  and ``Message : Create vnpu success`` / ``Destroy vnpu N success`` on success, else one of the
  refusal lines the tool prints.

Formats: the printf strings of npu-smi's own source (repository ``verylucky01/driver``, commit
``e29d066fd6ee84cae705e2000a0387d721d3aaa0``: ``src/custom/dev_prod/user/npucli/src/
npu_chip_info.c`` (info-vnpu), ``npu_info_print.c`` ``printf_template_info``, ``npu_chip_set.c``
(create / destroy), ``npu_set_print.c`` ``print_vnpu_mode_check_result``), checked against the
real outputs in ``tests/ascend/vnpu_fixtures`` (see SOURCES.md there).  Parsing is by landmarks
(``AICORE`` header, ``Total number of vnpu``, rows of five ``|``-separated cells), so borders
lost in a transcription or an older ``+====+`` rule still parse.

Note the tool's exit status does not say whether a vNPU command worked: "not in docker mode"
refusals return 0 (``print_vnpu_mode_check_result`` then ``return NPU_OK``), so callers read the
text, never only the status.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum

from accel.errors import ParseError

__all__ = [
    "SetOutcome",
    "SetResult",
    "VnpuInfo",
    "VnpuRow",
    "VnpuTemplate",
    "parse_info_vnpu",
    "parse_set_result",
    "parse_template_info",
]

_TOOL = "npu-smi"
_INT = re.compile(r"^\d+$")
_NUM = re.compile(r"^\d+(?:\.\d+)?$")


@dataclass(frozen=True)
class VnpuTemplate:
    """One template of ``template-info``: AI cores, whole GiB, AI CPUs, media engines."""

    name: str
    aicore: int
    memory_gib: int
    aicpu: float
    vpc: int
    venc: int
    jpegd: int
    pngd: float
    vdec: int
    jpege: int


def parse_template_info(text: str, *, command: str = "npu-smi info -t template-info") -> list[VnpuTemplate]:
    """The templates ``template-info`` lists, in its order; a block that does not parse raises."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if "template info is" in ln), None)
    if start is None:
        raise ParseError("no 'NPU instance template info is:' table", tool=_TOOL, command=command)
    out: list[VnpuTemplate] = []
    rows = [(i, _cells(ln)) for i, ln in enumerate(lines[start + 1 :], start + 2)]
    k = 0
    while k < len(rows):
        lineno, cells = rows[k]
        k += 1
        if not cells or cells[0] in ("Name",) or cells[0] == "GB" or not re.match(r"^vir\w+$", cells[0]):
            continue
        first = cells
        second = rows[k][1] if k < len(rows) else []
        k += 1
        if len(first) != 7 or len(second) != 3 or not all(_NUM.match(c) for c in [*first[1:], *second]):
            raise ParseError(
                f"template row {first[0]!r} does not read as 7 + 3 numbers",
                tool=_TOOL,
                command=command,
                line=lines[lineno - 1],
                lineno=lineno,
            )
        out.append(
            VnpuTemplate(
                name=first[0],
                aicore=int(float(first[1])),
                memory_gib=int(float(first[2])),
                aicpu=float(first[3]),
                vpc=int(float(first[4])),
                venc=int(float(first[5])),
                jpegd=int(float(first[6])),
                pngd=float(second[0]),
                vdec=int(float(second[1])),
                jpege=int(float(second[2])),
            )
        )
    return out


def _cells(line: str) -> list[str]:
    """A bordered row's whitespace-separated cells (borders and rules give none)."""
    s = line.strip()
    if not s or set(s) <= set("+-=|"):
        return []
    return s.strip("|").split()


@dataclass(frozen=True)
class VnpuRow:
    """One vNPU of ``info-vnpu``."""

    vnpu_id: int
    vgroup_id: int | None
    container_id: str | None
    #: Status column: ``True`` when a container uses the vNPU (``is_container_used``).
    in_use: bool | None
    template: str | None
    lineno: int = 0


@dataclass
class VnpuInfo:
    """The chip's vNPU view: free / total per resource (``None`` for ``NA``), the vNPUs."""

    #: resource -> (free, total), from the ``Free/Total`` line; AICORE, Memory (GiB), AICPU...
    resources: dict[str, tuple[int | None, int | None]] = field(default_factory=dict)
    count: int | None = None
    vnpus: list[VnpuRow] = field(default_factory=list)

    def free(self, name: str) -> int | None:
        return self.resources.get(name, (None, None))[0]

    def total(self, name: str) -> int | None:
        return self.resources.get(name, (None, None))[1]


_RESOURCE_NAMES = ("AICORE", "Memory", "AICPU", "VPC", "VENC", "VDEC", "JPEGD", "JPEGE", "PNGD")
_ROW = re.compile(r"^\|?\s*(\d+)\s*\|\s*(\S+)\s*\|\s*(\S+)\s*\|\s*(\S+)\s*\|\s*(\S*)\s*\|?\s*$")
_COUNT = re.compile(r"Total number of vnpu:\s*(\d+)")
_FREE_TOTAL = re.compile(r"^(\d+|NA)/(\d+|NA)$")


def parse_info_vnpu(text: str, *, command: str = "npu-smi info -t info-vnpu") -> VnpuInfo:
    """The chip's free / total resources and its vNPUs.  A refusal line (mode, SMP, container)
    raises :class:`ParseError` with that line; so does text with neither a resource table nor a
    vNPU count.  The count and the rows must agree (a row lost is a partial read, raised)."""
    lines = text.splitlines()
    refusal = _refusal_line(lines)
    if refusal is not None:
        raise ParseError(f"npu-smi refused: {refusal.strip()}", tool=_TOOL, command=command, line=refusal)
    info = VnpuInfo()
    header = next((i for i, ln in enumerate(lines) if "AICORE" in ln and "Memory" in ln), None)
    if header is not None:
        names = [c for c in _cells(lines[header]) if c in _RESOURCE_NAMES]
        for ln in lines[header + 1 :]:
            cells = _cells(ln)
            if cells and all(_FREE_TOTAL.match(c) for c in cells):
                if len(cells) != len(names):
                    raise ParseError(
                        f"{len(cells)} Free/Total cells for {len(names)} resources",
                        tool=_TOOL,
                        command=command,
                        line=ln,
                    )
                for name, cell in zip(names, cells, strict=True):
                    free, total = cell.split("/")
                    info.resources[name] = (_int_or_none(free), _int_or_none(total))
                break
    for lineno, ln in enumerate(lines, 1):
        m = _COUNT.search(ln)
        if m:
            info.count = int(m.group(1))
            continue
        r = _ROW.match(ln.strip())
        if r is None:
            continue
        vid, vgroup, container, status, template = r.groups()
        info.vnpus.append(
            VnpuRow(
                vnpu_id=int(vid),
                vgroup_id=int(vgroup) if _INT.match(vgroup) else None,
                container_id=None if container == "NA" else container,
                in_use=None if status == "NA" else status != "0",
                template=None if template in ("", "NA") else template,
                lineno=lineno,
            )
        )
    if header is None and info.count is None:
        raise ParseError("no vNPU resource table and no 'Total number of vnpu'", tool=_TOOL, command=command)
    if info.count is not None and info.count != len(info.vnpus):
        raise ParseError(
            f"'Total number of vnpu: {info.count}' but {len(info.vnpus)} vNPU rows",
            tool=_TOOL,
            command=command,
        )
    return info


def _int_or_none(text: str) -> int | None:
    return int(text) if _INT.match(text) else None


class SetOutcome(StrEnum):
    """What a ``create-vnpu`` / ``destroy-vnpu`` run printed, by cause."""

    OK = "ok"
    MODE_OFF = "mode-off"  # vnpu-mode is not docker (container) mode
    SMP = "smp"  # the NPU works in SMP mode
    NO_RESOURCE = "no-resource"  # Insufficient number of cores / AICPU / DVPP
    BAD_TEMPLATE = "bad-template"  # the -f template is not accepted
    NO_SUCH_VNPU = "no-such-vnpu"  # Error parameter of -v (destroy of an id not there)
    FAILED = "failed"  # create vnpu failed. / destroy vnpu N failed. (the DCMI call)
    NOT_SUPPORTED = "not-supported"  # This device does not support setting ...
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class SetResult:
    outcome: SetOutcome
    #: The line that decided the outcome (the tool's own words).
    message: str
    #: The vNPU id a destroy success names.
    vnpu_id: int | None = None


#: (pattern, outcome): the refusal lines of npu_chip_set.c / npu_set_print.c (module docstring).
_REFUSALS: tuple[tuple[re.Pattern[str], SetOutcome], ...] = (
    (re.compile(r"vnpu is not in docker mode", re.I), SetOutcome.MODE_OFF),
    (re.compile(r"Failed to get vnpu mode", re.I), SetOutcome.MODE_OFF),
    (re.compile(r"working in SMP mode", re.I), SetOutcome.SMP),
    (re.compile(r"^Insufficient number of", re.I), SetOutcome.NO_RESOURCE),
    (re.compile(r"parameter of -f", re.I), SetOutcome.BAD_TEMPLATE),
    (re.compile(r"Error parameter of -v", re.I), SetOutcome.NO_SUCH_VNPU),
    (re.compile(r"^(create vnpu failed|destroy vnpu \d+ failed)", re.I), SetOutcome.FAILED),
    (re.compile(r"does not support (setting|querying)", re.I), SetOutcome.NOT_SUPPORTED),
)


def _refusal_line(lines: list[str]) -> str | None:
    for ln in lines:
        s = ln.strip()
        if any(p.search(s) for p, _ in _REFUSALS):
            return ln
    return None


def parse_set_result(text: str) -> SetResult:
    """Classify what ``npu-smi set -t create-vnpu|destroy-vnpu`` printed (stdout and stderr)."""
    status = message = None
    for ln in text.splitlines():
        key, sep, value = ln.partition(":")
        if not sep:
            continue
        if key.strip() == "Status":
            status = value.strip()
        elif key.strip() == "Message":
            message = value.strip()
    for ln in text.splitlines():
        s = ln.strip()
        for pattern, outcome in _REFUSALS:
            if pattern.search(s):
                return SetResult(outcome, s)
    if status == "OK" and message is not None:
        m = re.match(r"Destroy vnpu (\d+) success", message)
        if m or message.startswith("Create vnpu success"):
            return SetResult(SetOutcome.OK, message, int(m.group(1)) if m else None)
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return SetResult(SetOutcome.UNKNOWN, first)
