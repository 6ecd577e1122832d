"""A kubelet plugin SIGKILLed while it creates or destroys a claim's partition leaves no orphan
partition and no claim naming a destroyed one (the long chain: benchmarks/partitions/kubelet_chain.py)."""

from __future__ import annotations

from pathlib import Path

from tests._helpers import loaded_script

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "partitions" / "kubelet_chain.py"


def test_a_short_kill_chain_leaves_no_orphan_and_no_dangling_claim(short_dir: Path) -> None:
    with loaded_script(SCRIPT, "accel_kubelet_chain") as chain:
        # seed 3: two rounds killed between the two steps of the first create or destroy, two at random
        out = chain.chain(4, short_dir, seed=3, max_delay_s=0.8)
    assert out["violations"] == []
    assert out["killed"] == 4 and out["between_steps"] == 2
    assert out["owned_max"] >= 1  # partitions were made (and checked) along the way
