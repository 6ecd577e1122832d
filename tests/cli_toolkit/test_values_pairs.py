"""The toolkit's one used/total pair parser: placeholders and sentinels are ``None``."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from accel.errors import ParseError
from accel.toolkit import (
    is_sentinel,
    parse_bytes,
    parse_celsius,
    parse_hertz,
    parse_power_pair,
    parse_used_total,
    parse_watts,
)
from accel.toolkit._values import SENTINELS, parse_pair

MIB = 2**20


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("93W / 350W", (93.0, 350.0)),  # ixsmi 4.1.0
        ("N/A / N/A", (None, None)),  # ixsmi 4.1.0, second chip of a BI-V150 board
        ("65535W / 250", (None, 250.0)),  # ixsmi, wedged BI-V100: the cap lost its unit
        ("53W / 450W", (53.0, 450.0)),  # mx-smi 2.2.4
        ("44W", (44.0, None)),  # mx-smi 2.1.6 prints usage only
        ("N/A/250W", (None, 250.0)),
        ("4294967295W / 300W", (None, 300.0)),  # uint32 max: not a 4.29 GW cap
        ("90W / 0xFFFFFFFF", (90.0, None)),
        ("-1 / 250 W", (None, 250.0)),
    ],
)
def test_power_pair(text: str, expected: tuple[float | None, float | None]) -> None:
    assert parse_power_pair(text) == expected


def test_power_pair_space_separated_efsmi() -> None:
    assert parse_power_pair("105W  300W", space_separated=True) == (105.0, 300.0)
    assert parse_power_pair("N/A  300W", space_separated=True) == (None, 300.0)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("810/65536 MiB", (810 * MIB, 65536 * MIB)),  # mx-smi
        ("513MiB / 32768MiB", (513 * MIB, 32768 * MIB)),  # ixsmi
        ("0MiB(81920MiB)", (0, 81920 * MIB)),
        ("N/A / 32768MiB", (None, 32768 * MIB)),  # docstring: either side may be a placeholder
        ("116MiB / N/A", (116 * MIB, None)),
        ("N/A / N/A", (None, None)),
        ("N/A", (None, None)),
        ("4294967295 / 65536 MiB", (None, 65536 * MIB)),
    ],
)
def test_used_total(text: str, expected: tuple[int | None, int | None]) -> None:
    assert parse_used_total(text) == expected


@pytest.mark.parametrize("text", ["abc / 1 MiB", "1 / 2 / 3 MiB", "12 MiB", "1 XiB / 2 XiB"])
def test_used_total_garbage_is_parse_error(text: str) -> None:
    with pytest.raises(ParseError):
        parse_used_total(text)


@pytest.mark.parametrize(
    "text", ["65535", "65535W", "0xFFFF", "0xFFFFFFFF", "4294967295", "4294967295 MHz", "-1", "-1 C", "65535.0"]
)
def test_sentinels(text: str) -> None:
    assert is_sentinel(text)


@pytest.mark.parametrize("text", ["65534", "250", "0", "1.5", "N/A", "", "65535.5"])
def test_not_sentinels(text: str) -> None:
    assert not is_sentinel(text)


def test_single_value_parsers_give_none_for_sentinels() -> None:
    assert parse_watts("4294967295") is None
    assert parse_watts("65535W") is None
    assert parse_watts("-1", bare_unit="W") is None
    assert parse_hertz("0xFFFFFFFF", bare_unit="MHz") is None
    assert parse_celsius("65535C") is None
    assert parse_bytes("4294967295", bare_unit="MiB") is None
    with pytest.raises(ParseError):
        parse_watts("250")  # a real number still needs its unit


_SENTINEL_TEXT = st.sampled_from(
    sorted({str(v) for v in SENTINELS} | {hex(v) for v in SENTINELS if v > 0} | {"0xFFFF", "0xFFFFFFFF", "65535"})
)
_UNIT = st.sampled_from(["", "W", " W", "MiB"])
_VALUE = st.one_of(st.integers(min_value=0, max_value=60000).map(str), st.sampled_from(["N/A", "xxx", "garbage"]))


@given(_SENTINEL_TEXT, _UNIT, _VALUE, st.booleans())
def test_property_sentinel_side_is_none(sentinel: str, unit: str, other: str, left: bool) -> None:
    side = sentinel + unit
    text = f"{side} / {other}" if left else f"{other} / {side}"
    for one in (parse_watts, parse_bytes):
        try:
            pair = parse_pair(text, one, bare_unit="W" if one is parse_watts else "MiB")
        except ParseError:
            continue  # the other side may be garbage or carry a unit this parser refuses
        assert pair[0 if left else 1] is None


@given(st.text(max_size=40))
def test_property_only_parse_error(text: str) -> None:
    for fn in (parse_used_total, parse_power_pair):
        with contextlib.suppress(ParseError):
            fn(text)
