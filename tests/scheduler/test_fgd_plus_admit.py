"""``fgd-plus-admit``: refuses a share that would strand compute on an untouched device while
untouched devices are scarce; otherwise decides as ``fgd-plus``."""

from __future__ import annotations

import numpy as np

from accel.scheduler import (
    AdmitFGDPlusScorer,
    ClusterState,
    DeviceSelector,
    DeviceSpec,
    FGDPlusScorer,
    HostSpec,
    Request,
    Scheduler,
    Share,
    available_scorers,
    make_scorer,
)
from tests.scheduler._stranding import WORKLOAD
from tests.scheduler._stranding import fill_whole as _fill_whole
from tests.scheduler._stranding import one_device_hosts as _cluster


def _sched(state: ClusterState, policy: str = "fgd-plus-admit") -> Scheduler:
    # the admission rule alone: its online forecast check (which refuses nothing until it has
    # seen a window of demand) is tested in test_forecast_check.py
    scorer = AdmitFGDPlusScorer(check_window=0.0) if policy == "fgd-plus-admit" else policy
    return Scheduler(state, scorer, workload=WORKLOAD, seed=1)


def test_registered_and_exported() -> None:
    assert "fgd-plus-admit" in available_scorers()
    sc = make_scorer("fgd-plus-admit")
    assert isinstance(sc, AdmitFGDPlusScorer) and isinstance(sc, FGDPlusScorer)


def test_refuses_a_stranding_share_on_a_fresh_device_when_fresh_ones_are_scarce() -> None:
    state = _cluster()
    sched = _sched(state)
    _fill_whole(sched, 7)  # 1 of 8 devices untouched: 12.5% < 15%
    d = sched.decide(Request("big", cpu_milli=1000, share=Share(810)))
    assert d.host is None and d.reason == "no host scored"
    # the same request fits, and fgd-plus places it
    plus = _sched(_cluster(), "fgd-plus")
    _fill_whole(plus, 7)
    assert plus.place(Request("big", cpu_milli=1000, share=Share(810))) is not None
    # a share whose remainder other pods can use still goes on the fresh device
    assert sched.place(Request("half", cpu_milli=1000, share=Share(450))) is not None


def test_a_stranding_share_still_fills_a_used_device() -> None:
    state = _cluster()
    sched = _sched(state)
    _fill_whole(sched, 6)
    small = sched.place(Request("small", cpu_milli=1000, share=Share(100)))
    assert small is not None  # now 1 of 8 untouched; the small share's device has 900 left
    big = sched.place(Request("big", cpu_milli=1000, share=Share(810)))
    assert big is not None and big.host == small.host and big.devices == small.devices


def test_admits_while_fresh_devices_are_plentiful() -> None:
    state = _cluster()
    sched = _sched(state)
    _fill_whole(sched, 6)  # 2 of 8 untouched: 25%
    assert sched.place(Request("big", cpu_milli=1000, share=Share(810))) is not None


def test_scores_like_fgd_plus_otherwise() -> None:
    state = _cluster()
    sched = _sched(state)
    _fill_whole(sched, 7)
    admit, plus = AdmitFGDPlusScorer(), FGDPlusScorer()
    admit.attach(state, WORKLOAD, 1)
    plus.attach(state, WORKLOAD, 1)
    hosts = np.arange(state.n_hosts, dtype=np.int64)
    for req in (Request("w", cpu_milli=1000, devices=1), Request("c", cpu_milli=1000),
                Request("h", cpu_milli=1000, share=Share(450))):
        a, sa = admit.score(state, req, hosts)
        p, sp = plus.score(state, req, hosts)
        assert np.array_equal(a, p) and np.array_equal(sa, sp)
    off = AdmitFGDPlusScorer(fresh_below=0.0)
    off.attach(state, WORKLOAD, 1)
    big = Request("big", cpu_milli=1000, share=Share(810))
    assert np.array_equal(off.score(state, big, hosts)[0], plus.score(state, big, hosts)[0])


def test_scarcity_is_judged_per_model() -> None:
    # 8 G2 devices (7 taken: scarce) and 8 T4 devices (all free): the 810 share is refused on G2's
    # last fresh device but placed on a T4 one
    specs = [HostSpec(f"g{i}", 64_000, 256 << 30, (DeviceSpec(id=f"g{i}/0", vendor="nvidia", model="G2"),))
             for i in range(8)]
    specs += [HostSpec(f"t{i}", 64_000, 256 << 30, (DeviceSpec(id=f"t{i}/0", vendor="nvidia", model="T4"),))
              for i in range(8)]
    state = ClusterState.from_specs(specs)
    sched = _sched(state)
    g2 = DeviceSelector(models=("G2",))
    for i in range(7):
        assert sched.place(Request(f"fill{i}", cpu_milli=1000, devices=1, selector=g2)) is not None
    assert sched.decide(Request("big-g2", cpu_milli=1000, share=Share(810), selector=g2)).host is None
    big = sched.place(Request("big", cpu_milli=1000, share=Share(810)))
    assert big is not None and big.host_name.startswith("t")


def test_no_refusal_where_a_whole_device_pod_could_not_run() -> None:
    # the last untouched device sits on a host with 800 milli CPU left: the workload's whole-GPU
    # pods need 1000, so keeping the device serves nobody and the share goes there
    specs = [HostSpec(f"n{i}", 64_000, 256 << 30, (DeviceSpec(id=f"n{i}/0", vendor="nvidia", model="G2"),))
             for i in range(7)]
    specs.append(HostSpec("poor", 800, 256 << 30, (DeviceSpec(id="poor/0", vendor="nvidia", model="G2"),)))
    state = ClusterState.from_specs(specs)
    sched = _sched(state)
    _fill_whole(sched, 7)
    big = sched.place(Request("big", cpu_milli=500, share=Share(810)))
    assert big is not None and big.host_name == "poor"
