"""Parsing is linear in its input (issue 14): no backtracking regex, a line-length cap.

The tool timeout covers the tool, not our parsing: one 20,000-character line used to take
``_PROC_ROW`` 2.3 s and the kunlunxin inventory 37 s.  These adversarial lines are the shapes
that made each pattern quadratic; each helper must answer them (correctly) in well under a
second, where the quadratic versions took seconds.  ``benchmarks/parse_scaling.py`` measures
time per byte against input size.
"""

from __future__ import annotations

import time

import pytest

from accel.errors import ParseError
from accel.toolkit import ParseContext, find_box_tables, is_rule, parse_kv, parse_process_rows, split_lines
from accel.toolkit._tables import _is_rule, header_fields
from accel.toolkit._text import MAX_LINE_CHARS

N = MAX_LINE_CHARS - 10
ADVERSARIAL = {
    "spaces": " " * N + "x",
    "tabs-free spaces then colon": " " * N + ":x",
    "dashes with a stray end": "+" + "-" * N + "x",
    "bars and spaces": "| " * (N // 2) + "x",
    "digits and spaces": "0 " * (N // 2) + "x",
    "colons": " :" * (N // 2) + "x",
    "a process row with a long gap": "|  0  1234  C  python" + " " * (N - 30) + "x",
}
CTX = ParseContext("tool", "tool")


def _quick(fn: object, *args: object) -> None:
    start = time.perf_counter()
    fn(*args)  # type: ignore[operator]
    assert time.perf_counter() - start < 1.0, f"{fn} took {time.perf_counter() - start:.2f} s"


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_toolkit_helpers_are_linear_on_adversarial_lines(name: str) -> None:
    line = ADVERSARIAL[name]
    text = "Processes:\n" + line + "\n"
    _quick(is_rule, line)
    _quick(_is_rule, line)
    _quick(header_fields, line)
    _quick(parse_kv, text)
    _quick(parse_process_rows, split_lines(text), CTX)
    _quick(find_box_tables, split_lines(text))


def _best_of_3(fn: object, *args: object) -> float:
    times = []
    for _ in range(3):
        start = time.perf_counter()
        fn(*args)  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return min(times)


def test_many_lines_without_a_separator_are_linear_in_parse_kv() -> None:
    # The section lookahead used to rescan the rest of the output from every line (quadratic
    # in lines: 4x the lines took 16x the time).  Compared in one run, so load does not matter.
    small = _best_of_3(parse_kv, "word\n" * 10_000)
    large = _best_of_3(parse_kv, "word\n" * 40_000)
    assert large / small < 8, f"4x the lines took {large / small:.1f}x the time"


def test_a_line_over_the_cap_is_a_typed_error_naming_it() -> None:
    text = "ok\n" + "x" * (MAX_LINE_CHARS + 1) + "\nok\n"
    with pytest.raises(ParseError) as info:
        split_lines(text)
    assert info.value.lineno == 2
    assert f"{MAX_LINE_CHARS + 1} characters" in str(info.value)


def test_tabs_that_expand_past_the_cap_are_refused_too() -> None:
    with pytest.raises(ParseError):
        split_lines("\t" * (MAX_LINE_CHARS // 4))


def test_a_line_at_the_cap_is_read() -> None:
    assert split_lines("y" * MAX_LINE_CHARS)[0].text == "y" * MAX_LINE_CHARS


def test_process_rows_still_read_every_shape() -> None:
    text = "\n".join(
        [
            "| Processes:                                                  |",
            "|  GPU   GI   CI        PID   Type   Process name   GPU Memory |",
            "|    0   N/A  N/A     1234      C   python             100MiB |",
            "|    1   N/A  N/A     5678      C   my app            2.5 GiB |",
            "|  2    999   python3 train.py   512 |",
            "| No running processes found |",
        ]
    )
    rows = parse_process_rows(split_lines(text), CTX)
    assert [(r.device_index, r.pid, r.name, r.memory_bytes) for r in rows] == [
        (0, 1234, "python", 100 * 2**20),
        (1, 5678, "my app", int(2.5 * 2**30)),
        (2, 999, "python3 train.py", 512 * 2**20),
    ]
