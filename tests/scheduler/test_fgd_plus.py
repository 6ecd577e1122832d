"""``fgd-plus``: spec-aware fragmentation and reservation of the models constrained pods need."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from accel.scheduler import (
    ClusterState,
    DeviceSelector,
    DeviceSpec,
    FGDPlusScorer,
    HostSpec,
    Request,
    Scheduler,
    Share,
    TypicalPods,
    available_scorers,
    load_openb_nodes,
    load_openb_pods,
    make_scorer,
    openb_order,
    replay,
)
from accel.scheduler._fgd import FragMeasure
from accel.scheduler._policies import SpecAwareFragMeasure, constrained_demand

CAPACITY = 6212 * 1000
T4 = DeviceSelector(models=("T4",))


def _host(name: str, n: int, model: str, cpu: int = 64_000) -> HostSpec:
    devs = tuple(DeviceSpec(id=f"{name}/{j}", vendor="nvidia", model=model, memory_bytes=16 << 30)
                 for j in range(n))
    return HostSpec(name, cpu, 256 << 30, devs)


def _cluster() -> ClusterState:
    return ClusterState.from_specs([_host("g2a", 8, "G2"), _host("g2b", 8, "G2"), _host("t4a", 2, "T4"),
                                    _host("t4b", 2, "T4")])


# a workload whose T4-only pods alone ask for more than the cluster's share of T4
SPEC_WORKLOAD = ([Request(f"t{i}", cpu_milli=4000, devices=1, selector=T4) for i in range(6)]
                 + [Request(f"f{i}", cpu_milli=4000, devices=1) for i in range(10)]
                 + [Request(f"s{i}", cpu_milli=2000, share=Share(500)) for i in range(4)]
                 + [Request("c0", cpu_milli=8000)])


def test_registered_and_exported() -> None:
    assert "fgd-plus" in available_scorers()
    assert isinstance(make_scorer("fgd-plus"), FGDPlusScorer)


def test_constrained_demand_routes_selector_demand_to_admitted_models() -> None:
    state = _cluster()
    share, kappa = constrained_demand(state, SPEC_WORKLOAD)
    models = [c.model for c in state.classes]
    total = 6 * 1000 + 10 * 1000 + 4 * 500
    assert share[models.index("T4")] == 6000 / total
    assert share[models.index("G2")] == 0.0
    assert kappa[models.index("T4")] == 4.0  # 4000 milli-CPU per 1000 milli-GPU
    no_spec, _ = constrained_demand(state, [r for r in SPEC_WORKLOAD if r.selector.is_empty])
    assert not no_spec.any()


def test_spec_aware_measure_is_fgd_without_selectors_and_drops_inaccessible_types() -> None:
    plain = [Request("a", cpu_milli=1000, devices=1), Request("b", cpu_milli=1000, share=Share(300))]
    typical = TypicalPods.from_requests(plain)
    fgd, ours = FragMeasure(typical, ["G2", "T4"]), SpecAwareFragMeasure(typical, ["G2", "T4"])
    cpu = np.array([8000, 500], dtype=np.int64)
    left = np.array([[1000, 200], [700, 0]], dtype=np.int64)
    cls = np.array([0, 1], dtype=np.int64)
    assert np.array_equal(fgd(cpu, left, cls), ours(cpu, left, cls))
    # one type may use only T4: FGD counts all idle G2 compute as fragment for it, we do not
    spec = TypicalPods.from_requests([Request("a", cpu_milli=1000, devices=1),
                                      Request("t", cpu_milli=1000, devices=1, selector=T4)])
    fgd, ours = FragMeasure(spec, ["G2", "T4"]), SpecAwareFragMeasure(spec, ["G2", "T4"])
    g2 = (np.array([8000], dtype=np.int64), np.array([[1000, 1000]], dtype=np.int64), np.array([0]))
    assert fgd(*g2)[0] == 0.5 * 2000  # half the pod mix can never run on G2
    assert ours(*g2)[0] == 0.0        # every type allowed on G2 fits: no fragment


def test_unconstrained_pod_leaves_the_scarce_model_to_constrained_pods() -> None:
    state = _cluster()
    pod = Request("free", cpu_milli=4000, devices=1)
    ours = Scheduler(state, "fgd-plus", workload=SPEC_WORKLOAD, seed=1)
    bal = Scheduler(_cluster(), FGDPlusScorer(reserve=0.0), workload=SPEC_WORKLOAD, seed=1)
    hosts = ours.filter(pod)
    plus, balance = ours.score(pod, hosts)[0], bal.score(pod, hosts)[0]
    t4 = np.array([state.classes[c].model == "T4" for c in state.host_class[hosts]])
    # against the policy without its reservation term: G2 scores are unchanged; each T4 host loses
    # one device of displaced T4 capacity times the T4 pressure (T4-only demand 6 of 18 devices,
    # free T4 4 of 20 devices: 6/18 * 20/4 = 5/3) times MAX_SCORE
    assert np.array_equal(plus[~t4], balance[~t4])
    assert np.allclose(balance[t4] - plus[t4], 100.0 * 5.0 / 3.0)
    dec = ours.decide(pod)
    assert dec.host is not None and state.classes[state.host_class[dec.host]].model == "G2"
    # a T4-only pod pays the same on every T4 host: only the host-local order among them counts
    t4_pod = Request("t", cpu_milli=4000, devices=1, selector=T4)
    t4_hosts = ours.filter(t4_pod)
    assert np.array_equal(ours.score(t4_pod, t4_hosts)[0], bal.score(t4_pod, t4_hosts)[0])


def test_constrained_pods_still_get_their_model() -> None:
    state = _cluster()
    sched = Scheduler(state, "fgd-plus", workload=SPEC_WORKLOAD, seed=1)
    allocs = [sched.place(Request(f"t{i}", cpu_milli=4000, devices=1, selector=T4)) for i in range(5)]
    placed = [a for a in allocs if a is not None]
    assert len(placed) == 4  # the four T4 devices, then nothing
    assert all(state.classes[state.host_class[a.host]].model == "T4" for a in placed)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(SPEC_WORKLOAD) - 1), st.integers(0, 3), st.booleans()),
                min_size=1, max_size=40))
def test_never_chooses_a_host_that_cannot_fit(ops: list[tuple[int, int, bool]]) -> None:
    state = _cluster()
    sched = Scheduler(state, "fgd-plus", workload=SPEC_WORKLOAD, seed=2)
    live = []
    for idx, _, release in ops:
        req = SPEC_WORKLOAD[idx]
        feasible = set(np.nonzero(state.feasible(req))[0].tolist())
        dec = sched.decide(req)
        assert (dec.host is None) == (not feasible)
        if dec.host is None:
            continue
        assert dec.host in feasible
        alloc = sched.bind(dec)  # allocate() re-checks fit and raises if it does not
        if not req.selector.is_empty:
            assert all(state.classes[state.dev_class[alloc.host, d]].model == "T4" for d in alloc.devices)
        live.append(alloc)
        if release and live:
            sched.release(live.pop(0))
        assert (state.dev_left >= 0).all() and (state.cpu_free >= 0).all()


def test_equals_fgd_balance_when_no_pod_has_a_selector(openb_dir: Path) -> None:
    hosts = load_openb_nodes(openb_dir / "openb_node_list_gpu_node.csv")
    pods = load_openb_pods(openb_dir / "openb_pod_list_default.csv")
    assert not any(p.request.selector.models for p in pods)
    order = openb_order(pods, CAPACITY, seed=42)[:2500]
    work = [p.request for p in pods]
    ours = replay(hosts, order, "fgd-plus", workload=work, seed=42)
    bal = replay(hosts, order, "fgd-balance", workload=work, seed=42)
    assert np.array_equal(ours.used_milli, bal.used_milli)
    assert np.array_equal(ours.placed, bal.placed)


def test_gpuspec33_places_constrained_pods_fgd_strands(openb_dir: Path) -> None:
    """Up to 100% arrived on gpuspec33 (seed 42) plain FGD is ~88% allocated; fgd-plus ~95%."""
    hosts = load_openb_nodes(openb_dir / "openb_node_list_gpu_node.csv")
    pods = load_openb_pods(openb_dir / "openb_pod_list_gpuspec33.csv")
    order = openb_order(pods, CAPACITY, seed=42)
    arrived = np.cumsum([p.gpu_milli for p in order])
    order = order[: int(np.searchsorted(arrived, CAPACITY))]
    work = [p.request for p in pods]
    ours = replay(hosts, order, "fgd-plus", workload=work, seed=42)
    fgd = replay(hosts, order, "fgd", workload=work, seed=42)
    assert ours.used_milli[-1] / CAPACITY > fgd.used_milli[-1] / CAPACITY + 0.04
