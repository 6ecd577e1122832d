"""The toolkit's CSV query parser and bindings by any vendor key."""

from __future__ import annotations

import pytest

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
