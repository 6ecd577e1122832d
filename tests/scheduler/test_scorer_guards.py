"""``fgd-balance``'s selector guard: with device-constrained requests in the workload it scores as FGD."""

from __future__ import annotations

import numpy as np

from accel.scheduler import (
    BalancedFGDScorer,
    ClusterState,
    DeviceSelector,
    DeviceSpec,
    FGDPlusScorer,
    FGDScorer,
    HostSpec,
    Request,
    Share,
    make_scorer,
)
from accel.scheduler._scorers import has_constrained_requests

T4 = DeviceSelector(models=("T4",))
ANY_MODEL = DeviceSelector(models=("G2", "T4"))


def _host(name: str, n: int, model: str, cpu: int) -> HostSpec:
    devs = tuple(DeviceSpec(id=f"{name}/{j}", vendor="nvidia", model=model, memory_bytes=16 << 30)
                 for j in range(n))
    return HostSpec(name, cpu, 256 << 30, devs)


def _cluster() -> ClusterState:
    # CPU-rich and CPU-poor hosts of both models, so the balance term has something to prefer
    return ClusterState.from_specs([_host("g2a", 8, "G2", 96_000), _host("g2b", 8, "G2", 24_000),
                                    _host("t4a", 2, "T4", 64_000), _host("t4b", 2, "T4", 8_000)])


FREE = ([Request(f"f{i}", cpu_milli=4000 + 3000 * (i % 3), devices=1) for i in range(10)]
        + [Request(f"s{i}", cpu_milli=2000 + 4000 * (i % 2), share=Share(300 + 100 * i)) for i in range(5)]
        + [Request("c0", cpu_milli=8000)])
SPEC = FREE + [Request(f"t{i}", cpu_milli=4000, devices=1, selector=T4) for i in range(4)]


def _scores(scorer: FGDScorer, state: ClusterState, workload: list[Request]) -> list[np.ndarray]:
    scorer.attach(state, workload, seed=0)
    hosts = np.arange(state.n_hosts, dtype=np.int64)
    return [scorer.score(state, r, hosts)[0] for r in workload]


def test_constrained_requests_are_detected() -> None:
    state = _cluster()
    assert has_constrained_requests(state, SPEC)
    assert not has_constrained_requests(state, FREE)
    # a selector that admits every model constrains nothing; nor does a CPU-only request
    assert not has_constrained_requests(state, [*FREE, Request("a", cpu_milli=1000, devices=1, selector=ANY_MODEL)])
    assert not has_constrained_requests(state, [Request("c", cpu_milli=1000, selector=T4)])


def test_guard_makes_fgd_balance_score_as_fgd_with_constrained_requests() -> None:
    state = _cluster()
    fgd = _scores(FGDScorer(), state, SPEC)
    guarded = _scores(BalancedFGDScorer(), state, SPEC)
    for a, b in zip(fgd, guarded, strict=True):
        assert np.array_equal(a, b)
    # the unguarded policy does differ on this cluster (the guard is what makes them equal)
    unguarded = _scores(BalancedFGDScorer(selector_guard=False), state, SPEC)
    assert any(not np.array_equal(a, b) for a, b in zip(fgd, unguarded, strict=True))


def test_guard_is_inert_without_constrained_requests() -> None:
    state = _cluster()
    guarded = _scores(BalancedFGDScorer(), state, FREE)
    unguarded = _scores(BalancedFGDScorer(selector_guard=False), state, FREE)
    fgd = _scores(FGDScorer(), state, FREE)
    for a, b in zip(guarded, unguarded, strict=True):
        assert np.array_equal(a, b)
    assert any(not np.array_equal(a, b) for a, b in zip(fgd, guarded, strict=True))


def test_fgd_plus_keeps_its_balance_term_with_constrained_requests() -> None:
    state = _cluster()
    plus = make_scorer("fgd-plus")
    assert isinstance(plus, FGDPlusScorer)
    plus.attach(state, SPEC, seed=0)
    assert plus.balance_on
    bal = make_scorer("fgd-balance")
    assert isinstance(bal, BalancedFGDScorer)
    bal.attach(state, SPEC, seed=0)
    assert not bal.balance_on
