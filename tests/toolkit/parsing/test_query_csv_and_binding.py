"""The toolkit's CSV query parser and bindings by any vendor key."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accel.errors import ConfigError, ParseError
from accel.toolkit import ParseContext, UnitReading, parse_bytes, parse_query_csv, parse_ratio, visible_binding

CTX = ParseContext("nvidia-smi", "nvidia-smi --query-gpu=index,memory.total,power.draw,utilization.gpu --format=csv")
FIELDS = ["index", "memory.total", "power.draw", "utilization.gpu"]


def test_header_units_and_values_with_units() -> None:
    text = "index, memory.total [MiB], power.draw [W], utilization.gpu [%]\n0, 81559 MiB, 71.20 W, 3 %\n"
    table = parse_query_csv(text, CTX, fields=FIELDS)
    assert [c.unit for c in table.columns] == [None, "MiB", "W", "%"]
    (row,) = table.rows
    assert row.get("memory.total") == "81559 MiB" and row.line.lineno == 2
    assert parse_bytes(row.get("memory.total")) == 81559 * 2**20


def test_nounits_takes_the_unit_from_the_header() -> None:
    text = "index, memory.total [MiB], power.draw [W], utilization.gpu [%]\n1, 81559, [N/A], 45\n"
    (row,) = parse_query_csv(text, CTX, units=False).rows
    assert row.get("memory.total") == "81559 MiB"
    assert parse_ratio(row.get("utilization.gpu")) == pytest.approx(0.45)
    assert row.get("power.draw") is None and row.unsupported == {"power.draw"}


def test_placeholders_and_bracketed_errors() -> None:
    text = "0, [Not Supported], [Unknown Error], N/A\n"
    (row,) = parse_query_csv(text, CTX, fields=FIELDS, header=False).rows
    assert row.cells == {"index": "0", "memory.total": None, "power.draw": None, "utilization.gpu": None}
    assert row.unsupported == {"memory.total"} and row.unreadable == {"power.draw"}


@pytest.mark.parametrize(
    ("text", "kwargs", "match"),
    [
        ("0, 1 MiB\n", {"fields": FIELDS, "header": False}, "expected 4 columns"),
        ("index, name\n0, x\n", {"fields": FIELDS}, "CSV header names"),
        ("0, 1, 2, 3\n", {"header": False}, "needs the queried fields"),
        ("\n\n", {}, "empty output"),
        ("index, memory.total [MiB\n", {}, "unreadable CSV header"),
        ("a, b [W], a [MiB]\n1, 2, 3\n", {}, "named twice: a"),
        ("1, 2\n", {"fields": ["a", "a"], "header": False}, "named twice: a"),
    ],
)
def test_bad_input_is_a_located_parse_error(text: str, kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ParseError, match=match) as info:
        parse_query_csv(text, CTX, **kwargs)  # type: ignore[arg-type]
    assert info.value.tool == "nvidia-smi"


def test_binding_by_index_uuid_or_extras_key() -> None:
    r = UnitReading(index=3, uuid="GPU-1", extras={"habana.ai/moduleId": 5})
    assert visible_binding("X")(r).visible_id == "3"
    assert visible_binding("X", key="uuid")(r).visible_id == "GPU-1"
    by_module = visible_binding("HABANA_VISIBLE_MODULES", key="habana.ai/moduleId")
    assert by_module(r).visible_id == "5" and by_module(r).visible_env == "HABANA_VISIBLE_MODULES"
    # A unit whose key is unknown is not bound (never a guess from another key).
    unknown = by_module(UnitReading(index=3))
    assert unknown.visible_env is None and unknown.visible_id is None


def test_binding_key_typo_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="moduleid"):
        visible_binding("X", key="moduleid")


_CELL = st.one_of(
    st.integers(0, 10**6).map(str),
    st.sampled_from(["[N/A]", "[Not Supported]", "[Unknown Error]", "N/A", "", "81559 MiB", "45 %", "GPU-1"]),
    st.text(alphabet='abc ,"[]%\x00\n', max_size=6),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(_CELL, min_size=1, max_size=5), max_size=4), st.booleans(), st.booleans())
def test_any_input_parses_or_raises_a_parse_error(rows: list[list[str]], header: bool, units: bool) -> None:
    text = "\n".join(", ".join(r) for r in rows)
    try:
        table = parse_query_csv(text, CTX, fields=None if header else ["a", "b", "c"], header=header, units=units)
    except ParseError as exc:
        assert exc.tool == "nvidia-smi"
        return
    # What did parse is well-formed: one cell per column, placeholders as None, never dropped.
    for row in table.rows:
        assert list(row.cells) == [c.name for c in table.columns]
        assert row.unsupported | row.unreadable <= {k for k, v in row.cells.items() if v is None}
