"""Autoscaling on the Azure 2023 conversation hour and Mooncake's conversation hour.

For each trace, four ways to provision one Llama-2-70B service (TP=8 on H100-80GB: one
replica = 8 devices, start-up 265 s, the published load time in the cost data).  Replicas are
calibrated **engine replicas** (``Service(engine=EngineConfig(...))``: vLLM-style chunked
prefill under a 2048-token budget, KV blocks taken as tokens are computed, preemption with
recompute, iterations timed by the operator profile of ``data/operators.json``; README section
5):

- ``static-peak``: the oracle's largest bin need, all hour;
- ``reactive``: :class:`ReactiveHPA` (Kubernetes' HPA rule and defaults) on outstanding
  requests per replica;
- ``predictive``: :class:`Predictive` (forecast work-token rate at start-up + sync ahead);
- ``oracle``: :func:`fit_oracle` (load known in advance, per-minute bins, the same start-up),
  then simulated to confirm its attainment.

The two dynamic policies run through :class:`ServingBridge`: every replica is a job of a
:class:`QueueingScheduler` on a 24-host x 8-device cluster (placement through the engine's
pipeline; no training here, see ``colocate.py``).  Device-seconds count from a replica's
placement (its start-up is paid) to its release after draining.

**Objectives: on the tail time between tokens.**  A request meets the objective when its TTFT
and the *largest* gap between two of its tokens are within bounds (``Objective(tbt_s=...)``),
and 99% of requests must: Azure TTFT 2 s and 200 ms between tokens (MLPerf Inference's
Llama-2-70B server bounds: TTFT 2 s, TPOT 200 ms); Mooncake TTFT 30 s and 300 ms (Mooncake's
TTFT threshold and the loosest of its TBT thresholds: a 2048-token chunk after a 128K-token
prefix takes about 0.26 s in the profile).

**Tuning and reporting are split.**  Everything a policy is given was chosen on minutes 0-20 of
each trace: a replica's capacity (``measure_capacities`` on the first ``cap_sample`` requests
of those minutes with Poisson arrivals, at 1, 2 and 4 replicas), the HPA target and the
predictive policy's scale-down window, hysteresis band and noise term (``--tune``: every
setting scored on those minutes *and* on three stress variants of them (``STRESS``: the same
requests with the arrival rate stepped up 25% at minute 10, ramped up 40% over minutes 8-16,
stepped down 25% at minute 10), each scored from minute 5 against its own oracle; the cheapest
setting (mean device-seconds over the oracle) with >= 99% attainment in every variant).
Every reported number covers minutes 20-60 only: attainment of the requests arriving then,
device-seconds held then (runs replay the whole hour so queues and replica counts are warm).

**Load.**  Azure's hour (5.5 req/s, mean 1,155 prompt and 211 output tokens) is replayed 4 times
(copy ``c`` 7.5 ``c`` seconds later: the trace's minute-scale shape, four times the volume).
Mooncake's hour (3.4 req/s of 12K-token prompts) is replayed as is.

Writes ``autoscale.csv``, ``autoscale_load.csv``, ``autoscale_timeline.csv`` and
``autoscale.png`` under ``--out``.  ``--quick`` (CI): Azure only (x1, 15 minutes: capacity from
minutes 0-5, report 5-15), about 15 s of CPU.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import csv
import dataclasses
import functools
import itertools
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from accel.scheduler.queueing import Policy, PriorityClass, QueueingScheduler, uniform_cluster
from accel.scheduler.serving import (
    Autoscaler,
    CacheAware,
    Capacity,
    EngineConfig,
    LeastOutstanding,
    Objective,
    OraclePlan,
    Predictive,
    ReactiveHPA,
    ReplicaSpec,
    Router,
    Service,
    ServingBridge,
    ServingRequest,
    ServingResult,
    decode_weight,
    fit_oracle,
    load_azure,
    load_catalog,
    load_mooncake,
    load_operator_profile,
    measure_capacities,
    prefill_rate,
    simulate,
)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SYNC_S = 15.0
COPY_GAP_S = 7.5  # Azure x4: copy c of a request arrives 7.5 c seconds after it
HOSTS = 24
TOKEN_BUDGET = 2048  # vLLM's max_num_batched_tokens for the engine replicas' chunked prefill
HPA_GRID = (8.0, 16.0, 32.0, 48.0, 64.0)
# Predictive grid: scale-down window x hysteresis band x noise term (headroom 0: the band, the
# noise term and the error quantile are its margins).
DOWN_GRID = (120.0, 300.0)
# This round (queue-aware term, derated capacity) drops band 0.2: it was never chosen in the two
# previous rounds' tuning on either trace, and the loaded machine could not afford the full grid.
BAND_GRID = (0.1,)
NOISE_Z_GRID: tuple[float | None, ...] = (None, 1.0)
# Fixed a priori, not tuned: the flat tuning minutes could not tell off / 0.75 / 0.9 apart, and
# scoring its own forecasts costs the policy nothing while they are right.
ERROR_Q = 0.9
WARMUP_S = 300.0  # tuning metrics skip the first 5 minutes (the policies' histories fill up)
# Stress variants of the tuning minutes (fixed before any reported number was looked at): the
# same requests with their arrival rate multiplied by a profile in the minutes' own time, so
# the tuning data has the steps and ramps a flat 20 minutes lacks.  (rate multiplier knots:
# (seconds of the original minutes, multiplier), linear between, flat outside.)
STRESS: dict[str, tuple[tuple[float, float], ...]] = {
    "as is": ((0.0, 1.0),),
    "step +25% at min 10": ((600.0, 1.0), (601.0, 1.25)),
    "ramp +40% over min 8-16": ((480.0, 1.0), (960.0, 1.4)),
    "step -25% at min 10": ((600.0, 1.0), (601.0, 0.75)),
}


def trace_path(name: str) -> Path:
    for base in (ROOT.parent / "shared", ROOT / "shared", Path("/work/shared")):
        p = base / "traces" / "serving" / name
        if p.is_file():
            return p
    return ROOT.parent / "shared" / "traces" / "serving" / name


@dataclass(frozen=True)
class Case:
    """One trace's setting; policy parameters are the ones ``--tune`` chose on minutes 0-tune_end."""

    name: str
    objective: Objective
    copies: int
    end_s: float
    tune_end_s: float
    hpa_target: float
    headroom: float
    down_window_s: float
    error_quantile: float | None = None
    noise_z: float | None = None
    down_band: float = 0.0
    cap_replicas: tuple[int, ...] = (1, 2, 4)
    cap_target: float = 0.995
    #: Capacity is measured on at most this many of the tuning minutes' requests (the first ones;
    #: their arrivals are replaced by a Poisson process anyway): engine replicas are slower to
    #: simulate than the whole-iteration model.
    cap_sample: int = 4000
    #: Calibrated engine replicas (``False``: the previous round's whole-iteration replicas).
    engine: bool = True
    tune_goal: float = 0.99
    #: The predictive policy's capacity is the measured (Poisson) table times this: the smallest
    #: derating the oracle needed on the tuning minutes and their stress variants (``--tune``
    #: prints it), i.e. how much less the trace's own arrivals let a replica carry than a steady
    #: Poisson stream does.  Measured on minutes 0-20 only; 1 = none.
    cap_derate: float = 1.0
    #: Queue-aware queue term (:meth:`Predictive.queue_rate`): only the backlog beyond half the
    #: TTFT bound of prefill counts as load.  ``False``: the previous rounds' queue / 60 s.
    queue_aware: bool = True


# Parameters of ENGINE_CASES, chosen by this round's ``--tune`` on engine replicas (minutes 0-20
# and the stress variants; results/autoscale_tune_{azure,mooncake}.txt).  Mooncake: HPA 32
# (every variant 100%, mean 1.089 x oracle), predictive window 300 s, band 0.1, no noise term
# (every variant 100%, mean 1.118).  Azure: HPA 64 (every variant 100%, mean 1.680); no
# predictive setting reaches 99% in the ramp variant (97.72% for all), so the fallback rule took
# window 120 s, band 0.1, no noise term (worst 97.72%, mean 1.008).
# The previous round's record (CASES below):
# Chosen by ``--tune`` (see :func:`tune_grid`): minutes 0-20 of each trace and three stress
# variants of them (``STRESS``), scored from minute 5; the cheapest setting (mean device-s /
# oracle over the variants) with >= 99% attainment in every variant.  HPA targets 4-64
# outstanding requests per replica; predictive scale-down window 120-300 s x band 0-0.2 x noise
# term off/1/2 (headroom 0, error quantile 0.9 fixed).
# Azure: HPA 48 (worst variant 99.25%, mean 1.005 x oracle); predictive window 120 s, band 0.1,
# no noise term (worst 99.27%, mean 0.977).
# Mooncake: HPA 8 (worst 99.16%, mean 1.698); no predictive setting reaches 99% in the ramp
# variant (best 98.87%; the oracle itself gets 98.94% there), so the fallback rule took window
# 120 s, band 0.1, noise z 1 (worst 98.87%, mean 1.025).
# The quick profile (CI) reuses Azure's choice.
AZURE_OBJ = Objective(2.0, 0.2, 0.99, tbt_s=0.2)
MOONCAKE_OBJ = Objective(30.0, 0.3, 0.99, tbt_s=0.3)
#: Engine replicas (this benchmark's default): objective on the largest time between tokens.
ENGINE_CASES = {
    # cap_derate (round 4): the smallest oracle derating over the tuning variants, as the previous
    # --tune printed them on minutes 0-20 (Azure 1.000, 1.000, 0.953, 1.000; Mooncake all 1.000).
    "azure": Case("azure", AZURE_OBJ, 4, 3600.0, 1200.0, 64.0, 0.0, 120.0, ERROR_Q, down_band=0.1,
                  cap_derate=0.953),
    "mooncake": Case("mooncake", MOONCAKE_OBJ, 1, 3600.0, 1200.0, 32.0, 0.0, 300.0, ERROR_Q,
                     down_band=0.1, cap_target=0.99, cap_derate=1.0),
    "azure-quick": Case("azure-quick", AZURE_OBJ, 1, 900.0, 300.0, 48.0, 0.0, 120.0, ERROR_Q,
                        down_band=0.1, cap_replicas=(1, 2), cap_sample=1000),
}
#: The previous round's cases (whole-iteration replicas, mean TPOT objective), as ``colocate.py``
#: still runs them (README section 4); ``--whole-iteration`` runs them here.
CASES = {
    "azure": Case("azure", Objective(2.0, 0.1, 0.99), 4, 3600.0, 1200.0, 48.0, 0.0, 120.0, ERROR_Q,
                  down_band=0.1, cap_replicas=(2, 4, 8, 16), cap_sample=10**9, engine=False),
    "mooncake": Case("mooncake", Objective(30.0, 1.0, 0.99), 1, 3600.0, 1200.0, 8.0, 0.0, 120.0, ERROR_Q,
                     noise_z=1.0, down_band=0.1, cap_target=0.99, cap_replicas=(2, 4, 8, 16),
                     cap_sample=10**9, engine=False),
    "azure-quick": Case("azure-quick", Objective(2.0, 0.1, 0.99), 1, 1800.0, 600.0, 48.0, 0.0, 120.0, ERROR_Q,
                        down_band=0.1, cap_replicas=(2, 4), cap_sample=10**9, engine=False),
}


def load(case: Case) -> list[ServingRequest]:
    if case.name.startswith("azure"):
        base = load_azure(trace_path("azure_llm_2023_conv.csv"))
    else:
        base = load_mooncake(trace_path("mooncake_conversation_trace.jsonl"))
    k = case.copies
    out = [ServingRequest(r.request_id * k + c, r.arrival_s + COPY_GAP_S * c, r.prompt_tokens, r.output_tokens,
                          r.hash_ids) for r in base for c in range(k)]
    return [r for r in out if r.arrival_s < case.end_s]


def _mult(t: float, knots: Sequence[tuple[float, float]]) -> float:
    if t <= knots[0][0]:
        return knots[0][1]
    for (t0, m0), (t1, m1) in itertools.pairwise(knots):
        if t <= t1:
            return m0 + (m1 - m0) * (t - t0) / (t1 - t0)
    return knots[-1][1]


def warp(reqs: Sequence[ServingRequest], knots: Sequence[tuple[float, float]],
         end_s: float) -> tuple[list[ServingRequest], float]:
    """``reqs`` (arriving before ``end_s``) with their arrival rate multiplied by the profile
    ``knots``, and where ``end_s`` lands: new time = integral of 1 / multiplier (1 s steps,
    linear within a step)."""
    tau = [0.0]
    for k in range(math.ceil(end_s) + 1):
        tau.append(tau[-1] + 1.0 / _mult(k + 0.5, knots))

    def at(t: float) -> float:
        k = min(int(t), len(tau) - 2)
        return tau[k] + (tau[k + 1] - tau[k]) * (t - k)

    out = [ServingRequest(r.request_id, at(r.arrival_s), r.prompt_tokens, r.output_tokens, r.hash_ids)
           for r in reqs if r.arrival_s < end_s]
    return out, at(end_s)


def router_for(case: Case, spec: ReplicaSpec) -> Callable[[], Router]:
    if case.name.startswith("mooncake"):
        return lambda: CacheAware(spec.capacity_blocks)
    return LeastOutstanding


def engine() -> QueueingScheduler:
    policy = Policy(classes=(PriorityClass("serving", 10, preempts=True, preemptible=False),
                             PriorityClass("training", 0)), grace_s=30.0)
    return QueueingScheduler(uniform_cluster(HOSTS, 8, model="H100", memory_bytes=80 * 10**9), policy)


def attainment(res: ServingResult, obj: Objective, start: float, end: float) -> float:
    outs = [o for o in res.outcomes if start <= o.arrival_s < end]
    return sum(obj.attained(o) for o in outs) / len(outs) if outs else math.nan


def plan_intervals(plan: OraclePlan, res: ServingResult, until: float) -> list[tuple[float, float]]:
    """(placed, released) of every replica of a simulated plan; a removal holds until drained."""
    last: dict[int, float] = {}
    for o in res.outcomes:
        last[o.replica_id] = max(last.get(o.replica_id, 0.0), o.end_s)
    start = {i: 0.0 for i in range(plan.initial)}
    stop: dict[int, float] = {}
    for c in plan.changes:
        if c.action == "add":
            start[c.replica_id] = c.time_s
        else:
            stop[c.replica_id] = max(c.time_s, last.get(c.replica_id, c.time_s))
    return [(s, stop.get(rid, until)) for rid, s in start.items()]


def held(intervals: Sequence[tuple[float, float]], start: float, end: float) -> float:
    return sum(max(0.0, min(e, end) - max(s, start)) for s, e in intervals)


def scale_events(timeline: Sequence[tuple[float, int]], start: float, end: float) -> int:
    n = 0
    for (_, a), (t, b) in itertools.pairwise(timeline):
        if start <= t < end and a != b:
            n += 1
    return n


def token_load(reqs: Sequence[ServingRequest], end: float) -> dict[str, float]:
    bins = int(end // 60)
    out: dict[str, float] = {}
    for label, f in (("prompt+output", lambda r: r.prompt_tokens + r.output_tokens),
                     ("output", lambda r: r.output_tokens), ("prompt", lambda r: r.prompt_tokens),
                     ("requests", lambda r: 1)):
        b = [0.0] * bins
        for r in reqs:
            i = int(r.arrival_s // 60)
            if i < bins:
                b[i] += f(r)
        out[label] = sum(b) / bins / max(b)
    return out


def run_case(case: Case, *, tune: bool = False,
             skip_hpa: bool = False) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    t0 = time.perf_counter()
    reqs = load(case)
    catalog = load_catalog()
    op = load_operator_profile("llama-2-70b", "h100-80gb")
    eng = EngineConfig(op, token_budget=TOKEN_BUDGET) if case.engine else None
    svc = Service(case.name, "llama-2-70b", "h100-80gb", case.objective, min_replicas=1, max_replicas=HOSTS,
                  pool="H100", engine=eng)
    spec = svc.replica_spec(catalog)
    weight = decode_weight(op) if case.engine else decode_weight(spec.profile)
    mk_router = router_for(case, spec)
    sample = [r for r in reqs if r.arrival_s < case.tune_end_s]
    cap = measure_capacities(sample[:case.cap_sample], spec, mk_router, case.objective, weight,
                             replicas=case.cap_replicas, target=case.cap_target,
                             iterations=5 if case.engine else 6)
    lead = spec.startup_s + SYNC_S
    caps = ", ".join(f"{n}: {c:.0f}" for n, c in cap.points)
    print(f"{case.name}: {len(reqs)} requests, capacity per replica (work tokens/s by replicas) {caps} "
          f"(decode weight {weight:.2f})")
    if tune:
        tune_grid(case, svc, spec, weight, mk_router, cap, lead, sample, skip_hpa=skip_hpa)
        return [], []
    plan, derate = fit_oracle(reqs, cap, weight, spec, mk_router, case.objective,
                              window=(case.tune_end_s, case.end_s), max_replicas=HOSTS, end_s=case.end_s)
    print(f"  oracle: capacity x {derate:.3f} meets the objective, peak {max(plan.need)} replicas, "
          f"{plan.initial} at the start")

    lo, hi = case.tune_end_s, case.end_s
    devs = spec_devices(svc)
    results: list[dict[str, object]] = []
    timeline: list[dict[str, object]] = []
    # oracle
    ores = simulate(reqs, mk_router(), [spec] * plan.initial, changes=list(plan.changes))
    o_ds = held(plan_intervals(plan, ores, hi), lo, hi) * devs
    o_need = [(b * 60.0, n) for b, n in enumerate(plan.need)]
    o_events = scale_events(o_need, lo, hi)
    # static at the oracle's peak
    peak = max(plan.need)
    sres = simulate(reqs, mk_router(), [spec] * peak)
    s_ds = peak * devs * (hi - lo)
    rows = [("static-peak", sres, s_ds, 0), ("oracle", ores, o_ds, o_events)]
    for b, n in o_need:
        timeline.append({"trace": case.name, "policy": "oracle", "t_s": b, "replicas": n})
    for a in (ReactiveHPA(case.hpa_target, sync_s=SYNC_S),
              predictive(case, cap, weight, lead)):
        br = ServingBridge(engine(), svc, a, reqs, mk_router(), initial=plan.initial)
        r = br.run(hi)
        tl = [(t, d) for t, d, _, _ in r.timeline]
        rows.append(("reactive" if isinstance(a, ReactiveHPA) else "predictive", r.serving,
                     r.serving_device_seconds(lo, hi), scale_events(tl, lo, hi)))
        for t, d, ready, starting in r.timeline:
            timeline.append({"trace": case.name, "policy": rows[-1][0], "t_s": t, "replicas": ready + starting,
                             "desired": d})
    for name, res, ds, ev in rows:
        att = attainment(res, case.objective, lo, hi)
        results.append({
            "trace": case.name, "policy": name, "device_s": round(ds), "vs_oracle": round(ds / o_ds, 3),
            "attainment": round(att, 4), "scale_events": ev,
            "ttft_p99_s": round(_pct([o.ttft_s for o in res.outcomes if lo <= o.arrival_s < hi], 0.99), 3),
            "tpot_p99_s": round(_pct([o.tpot_s for o in res.outcomes if lo <= o.arrival_s < hi
                                      and o.output_tokens > 1], 0.99), 4),
            "max_tbt_p99_s": round(_pct([o.max_tbt_s for o in res.outcomes if lo <= o.arrival_s < hi
                                         and o.max_tbt_s is not None and o.output_tokens > 1], 0.99), 4),
            "capacity_work_tok_s": " ".join(f"{n}:{c:.0f}" for n, c in cap.points),
            "oracle_derating": round(derate, 3),
            "objective": f"ttft {case.objective.ttft_s:g}s, largest gap between tokens "
                         f"{(case.objective.tbt_s or case.objective.tpot_s) * 1000:g}ms",
        })
    print(f"  ({time.perf_counter() - t0:.1f} s)")
    return results, timeline


def predictive(case: Case, cap: Capacity, weight: float, lead: float, *, down_window_s: float | None = None,
               down_band: float | None = None, noise_z: float | Literal["case"] | None = "case",
               cap_derate: float | None = None) -> Predictive:
    """The predictive policy with the case's tuned parameters (or the given ones, for ``--tune``)."""
    f = case.cap_derate if cap_derate is None else cap_derate
    table = Capacity(tuple((n, c * f) for n, c in cap.points)) if f != 1.0 else cap
    queue: dict[str, float] = {}
    if case.queue_aware and case.engine:
        queue = {"ttft_s": case.objective.ttft_s,
                 "prefill_tokens_per_s": prefill_rate(load_operator_profile("llama-2-70b", "h100-80gb"),
                                                      TOKEN_BUDGET)}
    return Predictive(table, weight, lead, headroom=case.headroom,
                      down_window_s=case.down_window_s if down_window_s is None else down_window_s,
                      error_quantile=case.error_quantile, noise_z=case.noise_z if noise_z == "case" else noise_z,
                      down_band=case.down_band if down_band is None else down_band, sync_s=SYNC_S, **queue)


def tune_grid(case: Case, svc: Service, spec: ReplicaSpec, weight: float, mk_router: Callable[[], Router],
              cap: Capacity, lead: float, sample: Sequence[ServingRequest], *,
              skip_hpa: bool = False) -> dict[str, str]:
    """Score the HPA and predictive grids on the tuning minutes and their stress variants.

    Each variant gets its own oracle (:func:`fit_oracle` on it); a setting's cost is its mean
    device-seconds / oracle over the variants, and it qualifies when its attainment is at least
    ``case.tune_goal`` in *every* variant (minutes 5 to the variant's end).  The cheapest
    qualifying setting of each kind is chosen; if none qualifies, the one whose worst variant's
    attainment is highest (to 0.1 point), the cheapest of those.
    """
    envs = []
    derates = []
    for label, knots in STRESS.items():
        rs, end = warp(sample, knots, case.tune_end_s)
        plan, derate = fit_oracle(rs, cap, weight, spec, mk_router, case.objective, max_replicas=HOSTS, end_s=end)
        ores = simulate(rs, mk_router(), [spec] * plan.initial, changes=list(plan.changes))
        ods = held(plan_intervals(plan, ores, end), WARMUP_S, end) * spec_devices(svc)
        oatt = attainment(ores, case.objective, WARMUP_S, end)
        print(f"  variant {label!r}: {len(rs)} requests to {end:.0f} s; oracle capacity x {derate:.3f}, "
              f"att {oatt:.4f}, device-s {ods:.0f}", flush=True)
        envs.append((rs, end, plan.initial, ods))
        derates.append(derate)
    # The predictive policy's capacity: the measured table at the smallest derating any variant's
    # oracle needed (what the trace's own arrivals let a replica carry, against Poisson's).
    cap_derate = min(derates)
    print(f"  capacity derating for the predictive policy (smallest of the variants' oracles): {cap_derate:.3f}",
          flush=True)

    def score(make: Callable[[], Autoscaler]) -> tuple[list[float], list[float]]:
        atts, costs = [], []
        for rs, end, initial, ods in envs:
            r = ServingBridge(engine(), svc, make(), rs, mk_router(), initial=initial).run(end)
            atts.append(attainment(r.serving, case.objective, WARMUP_S, end))
            costs.append(r.serving_device_seconds(WARMUP_S, end) / ods)
        return atts, costs

    rows: list[tuple[str, str, list[float], list[float]]] = []
    kinds = ("predictive",) if skip_hpa else ("hpa", "predictive")
    if not skip_hpa:
        for target in HPA_GRID:
            rows.append(("hpa", f"target={target:g}", *score(lambda t=target: ReactiveHPA(t, sync_s=SYNC_S))))
    for down, band, z in itertools.product(DOWN_GRID, BAND_GRID, NOISE_Z_GRID):
        def make(d: float = down, b: float = band, nz: float | None = z) -> Autoscaler:
            return predictive(case, cap, weight, lead, down_window_s=d, down_band=b, noise_z=nz,
                              cap_derate=cap_derate)
        rows.append(("predictive", f"down={down:g} band={band:g} noise_z={z}", *score(make)))
        atts, costs = rows[-1][2], rows[-1][3]
        print(f"  {rows[-1][0]:<10} {rows[-1][1]:<34} "
              + "  ".join(f"{a:.4f}/{c:.3f}" for a, c in zip(atts, costs, strict=True)), flush=True)
    print("  setting (attainment / device-s over oracle, per variant; mean cost)")
    for kind, label, atts, costs in rows:
        cells = "  ".join(f"{a:.4f}/{c:.3f}" for a, c in zip(atts, costs, strict=True))
        print(f"  {kind:<10} {label:<34} {cells}  mean {sum(costs) / len(costs):.3f}")
    chosen: dict[str, str] = {"cap_derate": f"{cap_derate:.3f}"}
    for kind in kinds:
        ok = [r for r in rows if r[0] == kind and min(r[2]) >= case.tune_goal]
        best = min(ok, key=lambda r: sum(r[3]) / len(r[3]), default=None)
        if best is None:  # none qualifies: the best worst case, then the cheapest
            best = min((r for r in rows if r[0] == kind),
                       key=lambda r: (-round(min(r[2]), 3), sum(r[3]) / len(r[3])))
            chosen[kind] = f"{best[1]} (none meets {case.tune_goal:.0%} in every variant: best worst case)"
        else:
            chosen[kind] = best[1]
        print(f"  chosen {kind}: {chosen[kind]}")
    return chosen


def spec_devices(svc: Service) -> int:
    return svc.replica_devices


def _pct(xs: Sequence[float], q: float) -> float:
    if not xs:
        return math.nan
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


def plot(timeline: Sequence[dict[str, object]], out: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot", file=sys.stderr)
        return
    traces = sorted({str(r["trace"]) for r in timeline})
    fig, axes = plt.subplots(len(traces), 1, figsize=(9, 3.2 * len(traces)), squeeze=False)
    for ax, tr in zip(axes[:, 0], traces, strict=False):
        for pol in ("oracle", "reactive", "predictive"):
            pts = [(float(str(r["t_s"])), int(str(r["replicas"]))) for r in timeline
                   if r["trace"] == tr and r["policy"] == pol]
            if pts:
                ax.step([p[0] / 60 for p in pts], [p[1] for p in pts], where="post", label=pol)
        ax.set_title(f"{tr}: replicas held (ready + starting; oracle: bins' need)")
        ax.set_xlabel("minute")
        ax.set_ylabel("replicas")
        ax.legend()
    fig.tight_layout()
    fig.savefig(out / "autoscale.png", dpi=110)


def write(rows: Sequence[dict[str, object]], path: Path) -> None:
    if not rows:
        return
    keys: list[str] = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(HERE / "results"))
    ap.add_argument("--quick", action="store_true", help="Azure x1, 15 minutes (CI)")
    ap.add_argument("--tune", action="store_true", help="print the tuning grid on the tuning minutes")
    ap.add_argument("--trace", choices=("azure", "mooncake"), default=None)
    ap.add_argument("--whole-iteration", action="store_true",
                    help="the previous round: whole-iteration replicas and the mean-TPOT objective (README 3.2)")
    ap.add_argument("--headroom", type=float, default=None,
                    help="sensitivity: override the tuned predictive headroom (not a tuned result; "
                         "writes under build/serving-sensitivity unless --out is given)")
    ap.add_argument("--hpa-target", type=float, default=None,
                    help="sensitivity: override the tuned HPA target (not a tuned result; writes under "
                         "build/serving-sensitivity unless --out is given)")
    ap.add_argument("--jobs", type=int, default=1,
                    help="run the traces in this many processes (the results do not depend on it)")
    ap.add_argument("--tune-skip-hpa", action="store_true",
                    help="--tune: score the predictive grid only (the HPA rule is unchanged since its last tuning)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    if (args.headroom is not None or args.hpa_target is not None) and args.out == str(HERE / "results"):
        out = ROOT / "build" / "serving-sensitivity"  # never over the tuned results
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    names = ["azure-quick"] if args.quick else [args.trace] if args.trace else ["azure", "mooncake"]
    all_rows: list[dict[str, object]] = []
    all_tl: list[dict[str, object]] = []
    loads: list[dict[str, object]] = []
    cases = CASES if args.whole_iteration else ENGINE_CASES
    todo = []
    for name in names:
        case = cases[name]
        if args.headroom is not None:
            case = dataclasses.replace(case, headroom=args.headroom)
        if args.hpa_target is not None:
            case = dataclasses.replace(case, hpa_target=args.hpa_target)
        todo.append(case)
        if args.tune:
            continue
        base = load(cases[name]) if cases[name].copies == 1 else load(
            Case(name, case.objective, 1, case.end_s, case.tune_end_s, 1.0, 0.0, 0.0))
        ld = token_load(base, case.end_s)
        loads.append({"trace": name, **{f"mean/max {k}": round(v, 3) for k, v in ld.items()}})
    job = functools.partial(run_case, tune=args.tune, skip_hpa=args.tune_skip_hpa)
    if args.jobs > 1 and len(todo) > 1:  # the traces are independent: one process each
        with concurrent.futures.ProcessPoolExecutor(min(args.jobs, len(todo))) as pool:
            outs = list(pool.map(job, todo))
    else:
        outs = [job(c) for c in todo]
    if args.tune:
        return 0
    for rows, tl in outs:
        all_rows += rows
        all_tl += tl
    print()
    print(f"{'trace':<12} {'policy':<12} {'device-s':>10} {'/oracle':>8} {'attain':>8} {'events':>6} "
          f"{'ttft p99':>9} {'tpot p99':>9} {'tbt p99':>9}")
    for r in all_rows:
        print(f"{r['trace']!s:<12} {r['policy']!s:<12} {r['device_s']!s:>10} {r['vs_oracle']!s:>8} "
              f"{float(str(r['attainment'])):>8.2%} {r['scale_events']!s:>6} {r['ttft_p99_s']!s:>9} "
              f"{r['tpot_p99_s']!s:>9} {r['max_tbt_p99_s']!s:>9}")
    for ld in loads:
        print(f"per-minute load mean/max, {ld['trace']}: " + ", ".join(f"{k.removeprefix('mean/max ')} {v}"
                                                                         for k, v in ld.items() if k != "trace"))
    for name in names:
        by = {str(r["policy"]): r for r in all_rows if r["trace"] == name}
        if by:
            p, o, h = by["predictive"], by["oracle"], by["reactive"]
            print(f"{name}: static/oracle {by['static-peak']['vs_oracle']}; goals: predictive attainment >= 99% "
                  f"{'Y' if float(str(p['attainment'])) >= 0.99 else 'n'}, <= 1.15 x oracle "
                  f"{'Y' if float(str(p['vs_oracle'])) <= 1.15 else 'n'}, beats reactive on device-s "
                  f"{'Y' if float(str(p['device_s'])) < float(str(h['device_s'])) else 'n'} and attainment "
                  f"{'Y' if float(str(p['attainment'])) > float(str(h['attainment'])) else 'n'}"
                  f" (oracle attainment {float(str(o['attainment'])):.2%})")
    write(all_rows, out / "autoscale.csv")
    write(loads, out / "autoscale_load.csv")
    write(all_tl, out / "autoscale_timeline.csv")
    plot(all_tl, out)
    print(f"\nwrote {out} in {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
