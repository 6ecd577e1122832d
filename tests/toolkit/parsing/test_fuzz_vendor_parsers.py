"""Hypothesis mutations of every Moore Threads / Iluvatar / MetaX / Kunlunxin / Enflame sample.

Each parser, and each backend over a replay of the mutated text, must either answer or raise
an :mod:`accel.errors` type: truncation, reordered and duplicated lines, garbage bytes,
missing columns and huge numbers never produce a foreign exception.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accel.errors import AccelError
from accel.plugin import BackendConfig
from accel.plugins import enflame, iluvatar, kunlunxin, metax, mthreads
from accel.plugins.enflame import _parse as ef
from accel.plugins.iluvatar import _parse as ix
from accel.plugins.kunlunxin import _parse as kl
from accel.plugins.metax import _parse as mx
from accel.plugins.mthreads import _parse as mt
from accel.tools import ReplayRunner

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
CSV_FIELDS = ["index", "name", "memory.total", "memory.used", "utilization.gpu", "temperature.gpu"]

# (sample, parser, plugin, argv the backend runs for it)
CASES: list[tuple[str, Callable[[str], object], object, str]] = [
    ("mthreads/mthreads-gmi_2.4.1_s5000_8gpu_ecc-ondie.txt", mt.parse_table, mthreads.PLUGIN, "mthreads-gmi"),
    ("mthreads/mthreads-gmi_1.12.2_s4000_iommu-wrong-mem.txt", mt.parse_table, mthreads.PLUGIN, "mthreads-gmi"),
    (
        "mthreads/mthreads-gmi-q-json_3.3.5-server_s5000_abridged.txt",
        mt.parse_query_json,
        mthreads.PLUGIN,
        "mthreads-gmi -q -j",
    ),
    ("mthreads/mthreads-gmi-q-json_3.3.5-server_s5000_abridged.txt", mt.parse_query_text, None, ""),
    ("mthreads/mthreads-gmi_2.4.1_s5000_8gpu_ecc-ondie.txt", mt.parse_mtlink, None, ""),
    ("iluvatar/ixsmi_4.1.0_bi-v150_16gpu_8boards.txt", ix.parse_table, iluvatar.PLUGIN, "ixsmi"),
    ("iluvatar/ixsmi_3.0.1_bi-v100_8gpu_after-reset.txt", ix.parse_table, iluvatar.PLUGIN, "ixsmi"),
    ("iluvatar/ixsmi_bi-v100_gpu5-wedged_then-ixsmi-r.txt", ix.parse_table, iluvatar.PLUGIN, "ixsmi"),
    (
        "iluvatar/ixsmi-query-gpu-csv_mr-v50_mr-v100.txt",
        lambda text: ix.parse_query_csv(text, CSV_FIELDS),
        None,
        "",
    ),
    ("metax/mx-smi_2.1.6_mxc550_8gpu.txt", mx.parse_mx_smi, metax.PLUGIN, "mx-smi"),
    ("metax/mx-smi_2.2.4_c550_8gpu_gpu-state.txt", mx.parse_mx_smi, metax.PLUGIN, "mx-smi"),
    ("metax/mx-smi-topo-m_8gpu_metaxlink-2x4.txt", mx.parse_mx_smi, None, ""),
    ("kunlunxin/xpu_smi_5.0.21.21_p800-oam_8xpu.txt", kl.parse_xpu_smi, kunlunxin.PLUGIN, "xpu_smi"),
    ("kunlunxin/xpu_smi_runtime4.31_r300_2dev.txt", kl.parse_xpu_smi, kunlunxin.PLUGIN, "xpu_smi"),
    ("enflame/efsmi_1.6.3.12_s60g_2vf-sriov.txt", ef.parse_table, enflame.PLUGIN, "efsmi"),
    ("enflame/efsmi_v1.2.0.301_s60_2dev.txt", ef.parse_table, enflame.PLUGIN, "efsmi"),
    ("enflame/efsmi-q_1.4.3.4_s60_elided.txt", ef.parse_query, enflame.PLUGIN, "efsmi -q"),
]
TEXTS = {name: (FIXTURES / name).read_text(encoding="utf-8") for name, *_ in CASES}
GARBAGE = st.text(alphabet=st.characters(codec="utf-8"), max_size=12) | st.sampled_from(
    ["\x00", "\ufffd\ufffd", "|", "||", "/", "N/A", "-", "℃", "x" * 5, "\x1b[31m", "\t", "99999999999999999999"]
)


@st.composite
def mutated(draw: st.DrawFn, text: str) -> str:
    lines = text.split("\n")
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["truncate", "drop", "swap", "dup", "garbage", "column", "huge", "chop"]))
        if not lines:
            break
        i = draw(st.integers(0, len(lines) - 1))
        if op == "truncate":
            lines = lines[:i]
        elif op == "drop":
            del lines[i]
        elif op == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "dup":
            lines.insert(i, lines[i])
        elif op == "garbage":
            pos = draw(st.integers(0, len(lines[i])))
            lines[i] = lines[i][:pos] + draw(GARBAGE) + lines[i][pos:]
        elif op == "column":  # a missing column: drop one '|'-separated cell
            cells = lines[i].split("|")
            if len(cells) > 2:
                del cells[draw(st.integers(1, len(cells) - 2))]
                lines[i] = "|".join(cells)
        elif op == "huge":
            lines[i] = re.sub(r"[0-9]+", lambda m: "9" * draw(st.integers(12, 400)), lines[i], count=1)
        elif op == "chop":  # a line cut short (a pipe closed mid-write)
            lines[i] = lines[i][: draw(st.integers(0, len(lines[i])))]
    return "\n".join(lines)


FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize(("name", "parse", "plugin", "argv"), CASES, ids=[c[0] for c in CASES])
@FUZZ
@given(data=st.data())
def test_parsers_and_backends_raise_only_accel_errors(
    name: str, parse: Callable[[str], object], plugin: object, argv: str, data: st.DataObject
) -> None:
    text = data.draw(mutated(TEXTS[name]))
    with contextlib.suppress(AccelError):
        parse(text)
    if plugin is None:
        return
    config = BackendConfig(runner=ReplayRunner.from_mapping({argv: text}))
    try:
        backend = plugin.open(config)  # type: ignore[attr-defined]
        inv = backend.inventory()
        backend.telemetry()
        backend.health()
        for dev in inv.devices:  # whatever came out is a valid model (validated on build)
            assert dev.id.startswith(dev.vendor + ":")
    except AccelError:
        pass


@FUZZ
@given(text=st.text(max_size=400))
def test_arbitrary_text_never_escapes(text: str) -> None:
    for _name, parse, *_ in CASES:
        with contextlib.suppress(AccelError):
            parse(text)
