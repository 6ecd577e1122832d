"""Hypothesis fuzzes every Hygon parser with mutations of the real samples.

Mutations: truncation, line reordering, garbage bytes, a dropped column, huge numbers, and
combinations.  Only :mod:`accel.errors` types may come out, and every parse finishes (no hang:
the parsers are linear scans; Hypothesis' deadline is off only because CI machines vary).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accel.errors import AccelError
from accel.plugins.hygon._parse import parse_concise, parse_json, parse_rocminfo, parse_showtopo
from accel.toolkit import ParseContext

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "hygon"
SAMPLES = {p.name: p.read_text() for p in sorted(FIX.glob("*.txt"))}
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_SHOWTOPO = (Path(__file__).parent / "test_samples.py").read_text().split('SHOWTOPO_REFERENCE_FORMAT = """\\\n')[1]
SHOWTOPO = _SHOWTOPO.split('"""')[0]

PARSERS: list[tuple[Callable[[str, ParseContext], Any], list[str]]] = [
    (parse_concise, [SAMPLES["hy-smi_k100-64g_8dcu_concise.txt"], SAMPLES["rocm-smi_dtk23.10_4x-dcu_concise.txt"]]),
    (parse_json, [SAMPLES["rocm-smi-json_dtk24.04.3_k100ai_1dcu.txt"], SAMPLES["rocm-smi-json_z100l_1dcu.txt"]]),
    (parse_rocminfo, [SAMPLES["rocminfo_dtk24.04.3_k100ai.txt"]]),
    (parse_showtopo, [SHOWTOPO]),
]
CTX = ParseContext("hy-smi", "hy-smi --fuzz")


@st.composite
def mutated(draw: st.DrawFn, text: str) -> str:
    lines = text.splitlines()
    kind = draw(st.sampled_from(["truncate", "reorder", "garbage", "drop-column", "huge", "combo"]))
    if kind in ("truncate", "combo"):
        cut = draw(st.integers(0, len(text)))
        text = text[:cut]
        lines = text.splitlines()
    if kind in ("reorder", "combo") and lines:
        lines = draw(st.permutations(lines))
        text = "\n".join(lines)
    if kind in ("garbage", "combo"):
        pos = draw(st.integers(0, len(text)))
        junk = draw(st.binary(min_size=1, max_size=40)).decode("utf-8", "replace")
        text = text[:pos] + junk + text[pos:]
    if kind == "drop-column":
        col = draw(st.integers(0, 9))
        out = []
        for line in text.splitlines():
            parts = re.split(r"(\s{2,})", line)
            cells = parts[0::2]
            if len(cells) > col:
                del cells[col]
            out.append("  ".join(cells))
        text = "\n".join(out)
    if kind in ("huge", "combo"):
        big = draw(st.sampled_from(["9" * 400, "1e400", "-1", "18446744073709551615", "NaN", "inf", "0x" + "f" * 64]))
        text = re.sub(r"[0-9]+(\.[0-9]+)?", big, text, count=draw(st.integers(1, 5)))
    return text


def _check(parser: Callable[[str, ParseContext], Any], text: str) -> None:
    # A typed error naming the tool is the contract; anything else propagates and fails.
    with contextlib.suppress(AccelError):
        parser(text, CTX)


@SETTINGS
@given(st.data())
def test_concise_parser_mutations(data: st.DataObject) -> None:
    parser, samples = PARSERS[0]
    _check(parser, data.draw(mutated(data.draw(st.sampled_from(samples)))))


@SETTINGS
@given(st.data())
def test_json_parser_mutations(data: st.DataObject) -> None:
    parser, samples = PARSERS[1]
    _check(parser, data.draw(mutated(data.draw(st.sampled_from(samples)))))


@SETTINGS
@given(st.data())
def test_rocminfo_parser_mutations(data: st.DataObject) -> None:
    parser, samples = PARSERS[2]
    _check(parser, data.draw(mutated(data.draw(st.sampled_from(samples)))))


@SETTINGS
@given(st.data())
def test_showtopo_parser_mutations(data: st.DataObject) -> None:
    parser, samples = PARSERS[3]
    _check(parser, data.draw(mutated(data.draw(st.sampled_from(samples)))))


@settings(max_examples=40, deadline=None)
@given(st.text(max_size=300))
def test_every_parser_on_arbitrary_text(text: str) -> None:
    for parser, _ in PARSERS:
        _check(parser, text)


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_backend_on_mutated_replays_raises_only_accel_errors(data: st.DataObject) -> None:
    """The whole backend (parsers + merge + model validation) over a mutated JSON + concise pair."""
    from accel.plugin import BackendConfig
    from accel.plugins.hygon import PLUGIN
    from accel.tools import ReplayRunner

    args = ("--showid --showmeminfo vram --showpower --showserial --showuse --showtemp --showproductname "
            "--showuniqueid --json")
    runner = ReplayRunner.from_mapping({
        f"hy-smi {args}": data.draw(mutated(SAMPLES["rocm-smi-json_dtk24.04.3_k100ai_1dcu.txt"])),
        "hy-smi": data.draw(mutated(SAMPLES["hy-smi_k100-64g_8dcu_concise.txt"])),
    })
    try:
        with PLUGIN.open(BackendConfig(runner=runner)) as b:
            b.inventory()
            b.telemetry()
    except AccelError:
        pass
