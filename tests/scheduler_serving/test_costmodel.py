"""Cost data: KV bytes per token, physical capacity, table interpolation, typed errors."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from accel.errors import SchedulerError
from accel.scheduler.serving import (
    CostTable,
    InvalidRequestError,
    UnknownModelError,
    cache_blocks,
    load_catalog,
)


def test_kv_bytes_per_token_computed_from_shape_matches_sources() -> None:
    cat = load_catalog()
    llama3 = cat.model("llama-3-8b")
    assert llama3.kv_bytes_per_token == 32 * 8 * 128 * 2 * 2 == 131_072
    for name in cat.model_names:
        m = cat.model(name)
        assert m.kv_bytes_per_token_stated is not None
        assert m.kv_bytes_per_token == m.kv_bytes_per_token_stated, name
        assert m.sources, f"{name} has no sources"
    assert cat.model("llama-2-70b").kv_bytes_per_token == 327_680


def test_cache_blocks_arithmetic() -> None:
    m = load_catalog().model("llama-3-8b")
    # 80e9 x 0.9 - 16e9 = 56e9 bytes; / (131072 x 512) = 834.4
    assert cache_blocks(m, 80_000_000_000) == 834
    # the figure: 64 GB at 128 KB a token, 512-token blocks, no runtime reserve
    assert cache_blocks(m, 80_000_000_000, memory_utilization=1.0) == (64_000_000_000 // (131_072 * 512)) == 953
    # a slice gets its own bytes: half a card holds far less (the weights take most of it)
    assert cache_blocks(m, 40_000_000_000) == (36_000_000_000 - 16_000_000_000) // (131_072 * 512)
    assert cache_blocks(m, 80_000_000_000, block_tokens=256) == 1668


def test_cache_blocks_rejects_bad_input() -> None:
    m = load_catalog().model("llama-3-8b")
    with pytest.raises(InvalidRequestError, match="do not fit") as e:
        cache_blocks(m, 16_000_000_000)
    assert e.value.field == "device_memory_bytes"
    for kw in ({"block_tokens": 0}, {"memory_utilization": 0.0}, {"memory_utilization": 1.5}):
        with pytest.raises(InvalidRequestError):
            cache_blocks(m, 80_000_000_000, **kw)  # type: ignore[arg-type]
    with pytest.raises(InvalidRequestError):
        cache_blocks(m, -1)


def test_table_interpolates_inside_and_extrapolates_beyond() -> None:
    t = CostTable((100.0, 200.0, 400.0), (10.0, 20.0, 60.0))
    assert t.at(100) == 10.0
    assert t.at(150) == pytest.approx(15.0)
    assert t.at(300) == pytest.approx(40.0)
    assert t.at(400) == 60.0
    assert t.at(600) == pytest.approx(100.0)  # along the last segment: 0.2 ms per unit
    assert t.at(0) == 10.0  # below the first point: the first point's floor
    with pytest.raises(InvalidRequestError):
        CostTable((1.0, 1.0), (1.0, 2.0))
    with pytest.raises(InvalidRequestError):
        CostTable((1.0, 2.0), (1.0, -2.0))


def test_profile_reads_the_splitwise_tables_in_seconds() -> None:
    p = load_catalog().profile("llama-2-70b", "h100-80gb")
    assert p.prefill_seconds(8192) == pytest.approx(0.845)
    assert p.prefill_seconds(3072) == pytest.approx((137 + 390) / 2 / 1000)
    assert p.prefill_seconds(12288) == pytest.approx((845 + (845 - 390)) / 1000)
    assert p.decode_step_seconds(1) == pytest.approx(0.0306)
    assert p.decode_step_seconds(128) == pytest.approx((50.2 + (50.2 - 38.6) * 2) / 1000)
    assert p.replica_memory_bytes == 8 * 80_000_000_000
    # grows with uncached tokens past the 512-token point, and with the batch
    xs = [512, 1024, 4096, 8192, 16384]
    assert all(p.prefill_seconds(a) < p.prefill_seconds(b) for a, b in itertools.pairwise(xs))
    assert all(p.decode_step_seconds(a) < p.decode_step_seconds(a + 1) for a in range(1, 100))
    with pytest.raises(InvalidRequestError):
        p.prefill_seconds(-1)
    with pytest.raises(InvalidRequestError):
        p.decode_step_seconds(0)


def test_unknown_model_and_profile_are_typed() -> None:
    cat = load_catalog()
    with pytest.raises(UnknownModelError, match="llama-3-8b") as e:
        cat.model("gpt-5")
    assert isinstance(e.value, SchedulerError) and e.value.name == "gpt-5"
    with pytest.raises(UnknownModelError):
        cat.profile("llama-3-8b", "h100-80gb")


def test_load_catalog_from_a_file_and_bad_files(tmp_path: Path) -> None:
    src = json.loads((Path(__file__).resolve().parents[2] / "scheduler/serving/data/models.json").read_text())
    good = tmp_path / "m.json"
    good.write_text(json.dumps(src))
    assert load_catalog(good).model_names == load_catalog().model_names
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(InvalidRequestError, match="cannot read"):
        load_catalog(bad)
    src["profiles"][0]["model"] = "nope"
    orphan = tmp_path / "orphan.json"
    orphan.write_text(json.dumps(src))
    with pytest.raises(UnknownModelError):
        load_catalog(orphan)


def test_data_file_ships_as_package_data() -> None:
    from importlib import resources

    text = resources.files("accel.scheduler.serving").joinpath("data", "models.json").read_text()
    assert "splitwise" in text.lower()
