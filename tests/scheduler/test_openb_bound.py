"""The openb allocation bound (benchmarks/openb/bound_openb.py): equal to the optimum on small
clusters solved by hand, never below what a real placement allocates, and refusing what it does
not model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accel.scheduler import (
    DeviceSelector,
    DeviceSpec,
    HostSpec,
    InvalidRequestError,
    Request,
    Share,
    TracePod,
    replay,
)
from tests._helpers import loaded_script

pytest.importorskip("scipy")

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "openb" / "bound_openb.py"
GIB = 1 << 30


@pytest.fixture(scope="module")
def bound() -> Iterator[ModuleType]:
    with loaded_script(SCRIPT, "openb_bound_under_test") as module:
        yield module


def host(name: str, gpus: int, *, cpu: int = 64_000, model: str = "G2", mem_gib: int = 256) -> HostSpec:
    devs = tuple(DeviceSpec(id=f"{name}/{j}", vendor="openb", kind="gpu", model=model) for j in range(gpus))
    return HostSpec(name, cpu, mem_gib * GIB, devs)


def share(name: str, milli: int, cpu: int = 1000) -> Request:
    return Request(name=name, cpu_milli=cpu, memory_bytes=GIB, share=Share(milli))


def whole(name: str, n: int, cpu: int = 1000, models: tuple[str, ...] = ()) -> Request:
    return Request(name=name, cpu_milli=cpu, memory_bytes=GIB, devices=n, selector=DeviceSelector(models=models))


@pytest.mark.parametrize("integer", [False, True])
def test_shares_over_half_cannot_pair(bound: ModuleType, integer: bool) -> None:
    # 2 GPUs, shares 600, 600, 600, 300: best is 600+300 and 600 = 1500 (the GPU compute alone
    # would allow 2000; at most one share over 500 milli per GPU)
    reqs = [share(f"s{i}", 600) for i in range(3)] + [share("t", 300)]
    b = bound.allocation_bound([host("h", 2)], reqs, integer=integer)
    assert b.exact and b.milli == pytest.approx(1500, abs=0.1)


def test_patterns_beat_the_aggregate(bound: ModuleType) -> None:
    # 2 GPUs, shares 600, 600, 450, 450: a GPU holds 450+450 or one 600 (600+450 > 1000), so the
    # best is 900 + 600 = 1500.  The patterns find it; GPU compute and the dual-feasible cuts
    # alone allow 1920 (the k=4 cut weighs 600 as 0.6 and 450 as 0.5: 2 x 600 + 1.6 x 450)
    reqs = [share(f"s{i}", 600) for i in range(2)] + [share(f"t{i}", 450) for i in range(2)]
    for integer in (False, True):
        assert bound.allocation_bound([host("h", 2)], reqs, integer=integer).milli == pytest.approx(1500, abs=0.1)
    assert bound.allocation_bound([host("h", 2)], reqs, patterns=False).milli == pytest.approx(1920, abs=0.1)


def test_cpu_and_model_limit_the_bound(bound: ModuleType) -> None:
    # T4 host (4 cores, 1 GPU), V100 host (16 cores, 2 GPUs); V100-only pods need 10 cores, the
    # others 7: nothing fits the T4 host, the V100 host takes two 7-core pods (or one 10-core
    # pod): 2000 of 3000 milli
    hosts = [host("t4", 1, cpu=4000, model="T4"), host("v100", 2, cpu=16_000, model="V100")]
    reqs = [whole(f"a{i}", 1, cpu=10_000, models=("V100",)) for i in range(3)]
    reqs += [whole(f"b{i}", 1, cpu=7000) for i in range(3)]
    for integer in (False, True):
        assert bound.allocation_bound(hosts, reqs, integer=integer).milli == pytest.approx(2000, abs=0.1)


def test_memory_slots_and_gpu_count(bound: ModuleType) -> None:
    hosts = [host("a", 4, mem_gib=8), host("b", 2)]
    # an 8-GPU pod fits nowhere; 4-GPU pods only on "a"; two 1-GPU pods with 6 GiB each cannot
    # share "a" (8 GiB), but fit "b" together
    reqs = [whole("big", 8), whole("four", 4)]
    reqs += [Request(name=f"m{i}", cpu_milli=1000, memory_bytes=6 * GIB, devices=1) for i in range(2)]
    assert bound.allocation_bound(hosts, reqs).milli == pytest.approx(6000, abs=0.1)
    slots = [HostSpec("s", 64_000, 64 * GIB, host("s", 4).devices, max_pods=2)]
    assert bound.allocation_bound(slots, [share(f"x{i}", 500) for i in range(8)]).milli == \
        pytest.approx(1000, abs=0.1)


def test_patterns_are_the_maximal_fillings(bound: ModuleType) -> None:
    assert sorted(bound.gpu_patterns([600, 300])) == [(0, 3), (1, 1)]
    assert bound.gpu_patterns([50, 60, 70], limit=10) is None


def test_dual_feasible_functions(bound: ModuleType) -> None:
    assert bound.dff(0.6, 1) == 1.0 and bound.dff(0.4, 1) == 0.0 and bound.dff(0.5, 1) == 0.5
    assert bound.dff(0.4, 2) == 0.5 and bound.dff(0.7, 2) == 1.0 and bound.dff(1 / 3, 2) == pytest.approx(1 / 3)


def test_refuses_what_it_does_not_model(bound: ModuleType) -> None:
    mixed = HostSpec("m", 64_000, 64 * GIB, (DeviceSpec(id="m/0", vendor="x", model="A"),
                                               DeviceSpec(id="m/1", vendor="x", model="B")))
    with pytest.raises(InvalidRequestError) as exc:
        bound.allocation_bound([mixed], [whole("w", 1)])
    assert exc.value.field == "devices"


SIZES = st.sampled_from([100, 250, 300, 400, 450, 500, 600, 700, 800])


@st.composite
def instances(draw: st.DrawFn) -> tuple[list[HostSpec], list[Request]]:
    models = ("A", "B")
    hosts = [host(f"h{i}", draw(st.sampled_from([1, 2, 4])), cpu=draw(st.sampled_from([4000, 8000, 16_000])),
                  model=draw(st.sampled_from(models)), mem_gib=draw(st.sampled_from([8, 32])))
             for i in range(draw(st.integers(1, 4)))]
    reqs: list[Request] = []
    for i in range(draw(st.integers(1, 14))):
        cpu = draw(st.sampled_from([500, 2000, 5000]))
        spec = draw(st.sampled_from([(), ("A",), ("B",)]))
        sel = DeviceSelector(models=spec)
        mem = draw(st.sampled_from([1, 4, 12])) * GIB
        if draw(st.booleans()):
            reqs.append(Request(name=f"p{i}", cpu_milli=cpu, memory_bytes=mem, share=Share(draw(SIZES)),
                                selector=sel))
        else:
            reqs.append(Request(name=f"p{i}", cpu_milli=cpu, memory_bytes=mem, devices=draw(st.sampled_from([1, 2, 4])),
                                selector=sel))
    return hosts, reqs


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(inst=instances(), policy=st.sampled_from(["random", "best-fit", "fgd", "gpu-packing", "fgd-plus-demand"]),
       seed=st.integers(0, 9))
def test_no_placement_beats_the_bound(bound: ModuleType, inst: tuple[list[HostSpec], list[Request]],
                                      policy: str, seed: int) -> None:
    hosts, reqs = inst
    res = replay(hosts, [TracePod(r.name, r) for r in reqs], policy, workload=reqs, seed=seed)
    placed = int(res.used_milli[-1])
    for integer in (False, True):
        b = bound.allocation_bound(hosts, reqs, integer=integer)
        assert placed <= b.milli + 1e-6, (policy, placed, b)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.sampled_from([0, 300, 450, 600, 810, 1000, 2000]), min_size=30, max_size=60),
       policy=st.sampled_from(["best-fit", "fgd", "fgd-plus-admit", "fgd-plus-demand"]))
def test_binned_bound_dominates_the_replay_metric(bound: ModuleType, sizes: list[int], policy: str) -> None:
    # 3 hosts x 2 GPUs; the metric's bins as run_openb.py computes them (binned_allocation)
    hosts = [host(f"h{i}", 2, cpu=6000) for i in range(3)]
    reqs = [Request(name=f"p{i}", cpu_milli=1000, memory_bytes=GIB) if s == 0 else
            share(f"p{i}", s) if s < 1000 else whole(f"p{i}", s // 1000) for i, s in enumerate(sizes)]
    curve = replay(hosts, [TracePod(r.name, r) for r in reqs], policy, workload=reqs, seed=3).curve()
    bins = np.flatnonzero(np.isfinite(curve))
    assert len(bins) > 0
    for pct in bins[-4:]:  # the fullest bins, where the bound binds
        b, n_att, exact, _ = bound.binned_bound(hosts, reqs, int(pct), checkpoints=2)
        assert exact and n_att > 0
        assert curve[pct] <= b + 1e-9, (pct, curve[pct], b)
