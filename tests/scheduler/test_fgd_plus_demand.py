"""``fgd-plus-demand``: refuses a stranding share on an untouched device while untouched devices
are fewer than the whole devices the demand still to come needs, and keeps whole hosts for
multi-device pods that only few hosts can hold."""

from __future__ import annotations

import numpy as np
import pytest

from accel.scheduler import (
    AdmitFGDPlusScorer,
    ClusterState,
    DemandFGDPlusScorer,
    DeviceSelector,
    DeviceSpec,
    HostSpec,
    InvalidRequestError,
    Request,
    Scheduler,
    Share,
    available_scorers,
    make_scorer,
)
from tests.scheduler._stranding import GIB, WORKLOAD
from tests.scheduler._stranding import fill_whole as _fill_whole
from tests.scheduler._stranding import one_device_hosts as _cluster


def test_registered_and_exported() -> None:
    assert "fgd-plus-demand" in available_scorers()
    sc = make_scorer("fgd-plus-demand")
    assert isinstance(sc, DemandFGDPlusScorer) and isinstance(sc, AdmitFGDPlusScorer)


def test_refusal_follows_the_demand_still_to_come() -> None:
    state = _cluster()
    sc = DemandFGDPlusScorer(need=1.6, check_window=0.0)  # the rule alone (check: test_forecast_check.py)
    sched = Scheduler(state, sc, workload=WORKLOAD, seed=1)
    _fill_whole(sched, 4)
    # 4,000 milli to come x 1.6 x 20/32,700 = 3.9 whole devices needed, 4 untouched: admitted
    # (fgd-plus-admit's fixed rule would admit too: 50% untouched)
    assert sched.decide(Request("big", cpu_milli=1000, share=Share(810))).host is not None
    assert sched.place(Request("half", cpu_milli=1000, share=Share(450))) is not None
    # 3,550 to come: 3.5 needed, 3 untouched: the 810 share is refused although it fits
    d = sched.decide(Request("big", cpu_milli=1000, share=Share(810)))
    assert d.host is None and d.reason == "no host scored"
    assert sc.arrived_estimate(state) == 4450 + 810
    sched.decide(Request("big", cpu_milli=1000, share=Share(810)))  # the same pod again: counted once
    assert sc.arrived_estimate(state) == 4450 + 810
    # a share whose remainder others can use still goes on an untouched device
    assert sched.place(Request("half2", cpu_milli=1000, share=Share(450))) is not None
    # fgd-plus-admit places the same 810 share (3 of 8 untouched is over its 20%)
    admit = Scheduler(_cluster(), "fgd-plus-admit", workload=WORKLOAD, seed=1)
    _fill_whole(admit, 4)
    assert admit.place(Request("half", cpu_milli=1000, share=Share(450))) is not None
    assert admit.place(Request("big", cpu_milli=1000, share=Share(810))) is not None


def test_past_the_horizon_the_fixed_rule_applies() -> None:
    state = _cluster()
    sched = Scheduler(state, DemandFGDPlusScorer(need=1.6, horizon=0.5, check_window=0.0), workload=WORKLOAD, seed=1)
    _fill_whole(sched, 5)  # past 50% of capacity: 3 of 8 untouched (37.5%) is not scarce
    assert sched.place(Request("big", cpu_milli=1000, share=Share(810))) is not None
    _fill_whole(sched, 1)  # 1 of 8 untouched: under 20%, refused
    assert sched.decide(Request("big2", cpu_milli=1000, share=Share(810))).host is None


def test_need_zero_never_refuses() -> None:
    state = _cluster()
    sched = Scheduler(state, DemandFGDPlusScorer(need=0.0), workload=WORKLOAD, seed=1)
    _fill_whole(sched, 7)
    assert sched.place(Request("big", cpu_milli=1000, share=Share(810))) is not None


def _big_and_small() -> list[HostSpec]:
    def host(name: str, cpu: int, mem_gib: int) -> HostSpec:
        return HostSpec(name, cpu, mem_gib * GIB,
                        tuple(DeviceSpec(id=f"{name}/{j}", vendor="nvidia", model="G2") for j in range(8)))
    return [host("big0", 128_000, 768), host("big1", 128_000, 768)] + [host(f"s{i}", 96_000, 384) for i in range(4)]


# two 8-device pods that need 120 CPUs fit only the big hosts
HUGE = [Request(f"huge{i}", cpu_milli=120_000, memory_bytes=700 * GIB, devices=8) for i in range(2)]
# 24 one-device pods with 16 CPUs: exactly the small hosts' CPU
SMALL = [Request(f"w{i}", cpu_milli=16_000, memory_bytes=32 * GIB, devices=1) for i in range(24)]


def test_keeps_the_hosts_only_multi_device_pods_can_use() -> None:
    sched = Scheduler(ClusterState.from_specs(_big_and_small()), "fgd-plus-demand", workload=HUGE + SMALL, seed=1)
    for r in SMALL:
        a = sched.place(r)
        assert a is not None and not a.host_name.startswith("big"), a.host_name
    for r in HUGE:
        a = sched.place(r)
        assert a is not None and a.host_name.startswith("big")
    # fgd-plus puts some of the small pods on the big hosts and one huge pod fails
    plus = Scheduler(ClusterState.from_specs(_big_and_small()), "fgd-plus", workload=HUGE + SMALL, seed=1)
    on_big = sum(plus.place(r).host_name.startswith("big") for r in SMALL)  # type: ignore[union-attr]
    assert on_big > 0 and [plus.place(r) is not None for r in HUGE] == [True, False]


def test_a_kept_host_still_takes_a_pod_that_fits_nowhere_else() -> None:
    state = ClusterState.from_specs(_big_and_small())
    sched = Scheduler(state, "fgd-plus-demand", workload=HUGE + SMALL, seed=1)
    for i in range(4):
        assert sched.place(Request(f"fill{i}", cpu_milli=90_000, memory_bytes=32 * GIB, devices=8)) is not None
    a = sched.place(Request("late", cpu_milli=8000, memory_bytes=32 * GIB, devices=1))
    assert a is not None and a.host_name.startswith("big")
    # only one big host left that holds a huge pod; the other huge pod has no host
    assert int(np.count_nonzero(state.dev_left[:2].sum(axis=1) == 8000)) == 1


def test_with_selectors_the_need_goes_to_the_models_pods_may_use() -> None:
    # 4 G2 + 4 T4 devices; every whole-device pod of the workload is T4-only: all the whole
    # devices still needed are T4's (8,000 to come x 1.6 x 20/28,100 = 9.1 > 4 untouched), none G2's
    def host(name: str, model: str) -> HostSpec:
        return HostSpec(name, 64_000, 256 * GIB, (DeviceSpec(id=f"{name}/0", vendor="nvidia", model=model),))
    state = ClusterState.from_specs([host(f"g{i}", "G2") for i in range(4)] + [host(f"t{i}", "T4") for i in range(4)])
    t4 = DeviceSelector(models=("T4",))
    workload = ([Request(f"w{i}", cpu_milli=1000, devices=1, selector=t4) for i in range(20)]
                + [Request(f"b{i}", cpu_milli=1000, share=Share(810)) for i in range(10)])
    # the demand rule alone (the online forecast check, which needs a window of history, is
    # tested in test_forecast_check.py)
    sched = Scheduler(state, DemandFGDPlusScorer(check_window=0.0), workload=workload, seed=1)
    assert sched.decide(Request("big-t4", cpu_milli=1000, share=Share(810), selector=t4)).host is None
    big = sched.place(Request("big", cpu_milli=1000, share=Share(810)))
    assert big is not None and big.host_name.startswith("g")


@pytest.mark.parametrize("kwargs", [
    {"need": -0.1}, {"need": float("nan")}, {"horizon": 0.0}, {"horizon": float("inf")},
    {"keep_hosts": -1.0}, {"min_group_devices": 1}, {"min_group_devices": 2.5},
    {"fresh_below": 1.5}, {"stranded_below": float("nan")},
])
def test_bad_parameters_are_refused_with_the_parameter_named(kwargs: dict[str, float]) -> None:
    name = next(iter(kwargs))
    with pytest.raises(InvalidRequestError, match=f"fgd-plus-demand: {name} must be"):
        DemandFGDPlusScorer(**kwargs)


def test_admit_names_itself_in_a_bad_parameter_error() -> None:
    with pytest.raises(InvalidRequestError, match="fgd-plus-admit: fresh_below must be"):
        AdmitFGDPlusScorer(fresh_below=-0.2)
