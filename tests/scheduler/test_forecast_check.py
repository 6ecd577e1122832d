"""The online forecast check of the refusing policies (``fgd-plus-admit``, ``fgd-plus-demand``):
a refusal needs the whole-device pods it keeps devices for to be arriving at the rate observed,
so a stream where they never come is packed exactly as ``fgd-plus`` packs it."""

from __future__ import annotations

import numpy as np
import pytest

from accel.scheduler import AdmitFGDPlusScorer, DemandFGDPlusScorer, ForecastCheck, Request, Scheduler, Share
from tests.scheduler._stranding import WORKLOAD
from tests.scheduler._stranding import one_device_hosts as _cluster


def test_rate_is_whole_devices_per_milli_over_the_last_window() -> None:
    chk = ForecastCheck(window=0.1, slack=1.0)
    chk.reset(2)
    total = 10_000  # window = 1,000 milli of demand
    chk.saw(Request("s0", cpu_milli=1, share=Share(500)), None)
    assert chk.rate(total) is None  # less than a window seen
    chk.saw(Request("w0", cpu_milli=1, devices=1), np.array([1.0, 0.0]))
    chk.saw(Request("w0", cpu_milli=1, devices=1), np.array([1.0, 0.0]))  # scored twice: counted once
    assert chk.seen == 1500.0
    rate = chk.rate(total)
    assert rate is not None
    # from the sample at 500 (0 whole devices) to 1,500 (1): 1 device per 1,000 milli on model 0
    np.testing.assert_allclose(rate, [1e-3, 0.0])
    # 3 untouched devices of model 0 are fewer than 1e-3 x 4,000 to come: allowed; model 1 never
    assert chk.allows(np.array([3.0, 3.0]), total, 4000.0).tolist() == [True, False]
    assert chk.allows(np.array([5.0, 0.0]), total, 4000.0).tolist() == [False, False]


def _shares_only(sched: Scheduler, n: int) -> int:
    """Offer ``n`` 810-milli shares (the workload promises whole-device pods; none come)."""
    return sum(sched.place(Request(f"big{i}", cpu_milli=1000, share=Share(810))) is not None for i in range(n))


@pytest.mark.parametrize("cls", [AdmitFGDPlusScorer, DemandFGDPlusScorer])
def test_when_the_forecast_misses_it_packs_like_fgd_plus(cls: type[AdmitFGDPlusScorer]) -> None:
    plain = _shares_only(Scheduler(_cluster(20), "fgd-plus", workload=WORKLOAD, seed=1), 20)
    alone = _shares_only(Scheduler(_cluster(20), cls(check_window=0.0), workload=WORKLOAD, seed=1), 20)
    checked = _shares_only(Scheduler(_cluster(20), cls(), workload=WORKLOAD, seed=1), 20)
    assert plain == 20
    assert alone < plain  # the rule alone keeps devices for whole-device pods that never come
    assert checked == plain


def test_when_the_forecast_holds_the_check_lets_the_rule_refuse() -> None:
    # whole-device pods keep coming (2 per 810 share): the observed rate confirms the forecast and
    # the demand rule refuses a stranding share once untouched devices run short (slack 1.6 as the
    # rule's need: 1.0 would also ask the check to cover the devices shares take, which it does not)
    sc = DemandFGDPlusScorer(need=1.6, check_slack=1.6)
    sched = Scheduler(_cluster(20), sc, workload=WORKLOAD, seed=1)
    refused = 0
    for i in range(6):
        for j in range(2):
            sched.place(Request(f"w{i}-{j}", cpu_milli=1000, devices=1))
        if sched.decide(Request(f"big{i}", cpu_milli=1000, share=Share(810))).host is None:
            refused += 1
        else:
            sched.place(Request(f"big{i}", cpu_milli=1000, share=Share(810)))
    assert sc.check is not None and sc.check.rate(20_000) is not None
    assert refused >= 1


def test_bad_check_parameters_are_refused() -> None:
    from accel.scheduler import InvalidRequestError
    for kw in ({"check_window": -0.1}, {"check_window": 2.0}, {"check_slack": 0.0}, {"check_span": float("nan")}):
        with pytest.raises(InvalidRequestError, match=next(iter(kw))):
            DemandFGDPlusScorer(**kw)


def test_the_default_scorer_is_named_and_used() -> None:
    from accel.scheduler import DEFAULT_SCORER, available_scorers
    assert DEFAULT_SCORER in available_scorers()
    assert Scheduler(_cluster(4), workload=WORKLOAD).scorer.name == DEFAULT_SCORER
