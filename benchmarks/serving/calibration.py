"""Calibration of the serving simulator: the operator profile against published measurements.

Part 0, validation against published end-to-end runs (README section 5.1, the points and the
rule fixed before this comparison was first run): each run in ``operators.json``'s
``end_to_end_validation`` (Lambda's vLLM runs of Llama-3-70B BF16 at TP8 on 8 x H100, every
request's prompt and output tokens recorded) is replayed on one engine replica, all requests at
time 0, and its median TPOT, median TTFT and duration compared with the published ones; a point
is met within 20% (``|simulated / measured - 1| <= 0.2``).

Part 1, interpolation check.  The engine replica (``ReplicaSpec(engine=EngineConfig(...))``) times each
iteration from ``scheduler/serving/data/operators.json``: per-layer linear-operator and
all-reduce tables read from Vidur's measured H100 profile of Llama-2-70B at tensor parallel 8
(microsoft/vidur@7d47513363ec447a741ac5e47241580b47724fbf, ``mlp.csv`` and
``network/h100_dgx/all_reduce.csv``).  The table keeps only some token counts (the fit nodes);
the rows at the other token counts are held out and listed in the data file as validation
points.  The table printed here compares the model with each held-out point; the goal is
within 20%.  What they check: how the profile is read between its nodes (interpolation of
measured rows of the same source), not an independent end-to-end measurement.

Part 2, comparisons (not validation, printed with their ratios): the old whole-iteration
tables (Splitwise's measured end-to-end prefill and decode step, still used by replicas
without an engine), and NVIDIA's published NIM concurrency-1 inter-token latency for
Llama-3.1-70B-Instruct (docs.nvidia.com/nim/benchmarking/llm/1.0.0/performance, version
1.3.0: 13.21 ms; the stored excerpt does not show that table's GPU count or precision, so it
is a comparison only).

Part 3, the simulator on a shared trace: the first ``--requests`` requests of the Azure 2023
conversation trace on 2 replicas, the old model (whole prefill, output reserved) against the
engine model (2048-token budget), side by side: TTFT p99, mean time per output token p50 and
the tail time between tokens (p99 of every gap), preemptions, and the old/new ratios.

Run: ``python benchmarks/serving/calibration.py`` (about a minute; ``--quick``: parts 1-2 only).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from accel.scheduler.serving import (
    EndToEndRun,
    EngineConfig,
    LeastOutstanding,
    ReplicaSpec,
    ServingRequest,
    load_azure,
    load_catalog,
    load_operator_profile,
    percentile,
    simulate,
)

TRACES = Path("/work/shared/traces/serving")
NIM_ITL_CONCURRENCY_1_MS = 13.21


def replay(run: EndToEndRun, spec: ReplicaSpec) -> dict[str, float]:
    """The run's metrics from the simulator, computed as ``benchmark_serving.py`` computes them."""
    reqs = [ServingRequest(i, 0.0, p, o, ()) for i, (p, o) in enumerate(run.requests())]
    res = simulate(reqs, LeastOutstanding(), [spec])
    if not res.complete:
        raise RuntimeError(f"{run.name}: {len(res.unserved)} requests not served")
    return {
        "median_tpot_s": percentile([o.tpot_s for o in res.outcomes if o.output_tokens > 1], 0.5),
        "median_ttft_s": percentile([o.ttft_s for o in res.outcomes], 0.5),
        "duration_s": max(o.end_s for o in res.outcomes),
    }


def end_to_end() -> tuple[int, int]:
    """Part 0: (points met, points) over the published end-to-end runs."""
    op = load_operator_profile("llama-2-70b", "h100-80gb")
    prof = load_catalog().profile("llama-2-70b", "h100-80gb")
    print("0. validation: published end-to-end runs replayed on one engine replica (README 5.1)")
    print(f"   {'point':<22} {'measured':>10} {'simulated':>10} {'error':>7}  within 20%")
    met = total = 0
    for run in op.end_to_end:
        budget = int(run.config.get("token_budget", 2048))
        spec = ReplicaSpec.from_memory(prof, engine=EngineConfig(op, token_budget=budget))
        sim = replay(run, spec)
        for metric, measured in run.measured.items():
            err = sim[metric] / measured - 1.0
            ok = abs(err) <= 0.20
            met += ok
            total += 1
            label = f"{run.name}-{metric.removeprefix('median_').removesuffix('_s')}"
            print(f"   {label:<22} {measured:>10.4f} {sim[metric]:>10.4f} {err:>+7.1%}  {'yes' if ok else 'MISS'}")
        print(f"     ({len(run.requests())} of {len(run.prompt_tokens)} requests replayed; {run.source[:72]}...)")
    print(f"   met: {met} of {total}")
    return met, total


def validation() -> bool:
    op = load_operator_profile("llama-2-70b", "h100-80gb")
    print(
        "\n1. interpolation check, held-out Vidur rows (per-layer ms: linear operators + 2 all-reduces), "
        "Llama-2-70B TP8 H100"
    )
    print(f"   {'point':<24} {'tokens':>6} {'measured':>9} {'model':>9} {'error':>7}  within 20%")
    ok = True
    for v in op.validation:
        model = op.layer_ms(v.tokens)
        err = model / v.layer_ms - 1
        ok &= abs(err) <= 0.20
        print(f"   {v.name:<24} {v.tokens:>6} {v.layer_ms:>9.4f} {model:>9.4f} {err:>+7.1%}  {abs(err) <= 0.20}")
    print(f"   fit nodes: {[int(x) for x in op.linear_ms_per_layer.xs]}")
    print(f"   source: {op.sources['linear_ms_per_layer'][:110]}...")
    return ok


def comparisons() -> None:
    op = load_operator_profile("llama-2-70b", "h100-80gb")
    old = load_catalog().profile("llama-2-70b", "h100-80gb")
    print("\n2. comparisons (not validation)")
    print(f"   {'quantity':<46} {'old table':>9} {'model':>9} {'old/model':>9}")
    for b in (1, 8, 16, 32, 64):
        new = op.decode_step_seconds(b, b * 640)  # prompt 512 + ~128 generated, as Splitwise's rows
        o = old.decode_step_seconds(b)
        print(
            f"   {'decode step ms, batch ' + str(b) + ' (Splitwise rows)':<46} {o * 1e3:>9.1f} {new * 1e3:>9.1f} "
            f"{o / new:>9.2f}"
        )
    for n in (512, 1024, 2048, 4096, 8192):
        new = op.prefill_seconds(n)
        o = old.prefill_seconds(n)
        print(
            f"   {'prefill ms, ' + str(n) + ' tokens (Splitwise rows)':<46} {o * 1e3:>9.1f} {new * 1e3:>9.1f} "
            f"{o / new:>9.2f}"
        )
    new = op.decode_step_seconds(1, 300)
    print(
        f"   {'NIM Llama-3.1-70B ITL, concurrency 1 (config?)':<46} {NIM_ITL_CONCURRENCY_1_MS:>9.2f} "
        f"{new * 1e3:>9.2f} {NIM_ITL_CONCURRENCY_1_MS / 1e3 / new:>9.2f}"
    )


def trace(requests: int) -> None:
    path = TRACES / "azure_llm_2023_conv.csv"
    if not path.exists():
        print(f"\n3. skipped: {path} not found")
        return
    reqs = load_azure(path)[:requests]
    prof = load_catalog().profile("llama-2-70b", "h100-80gb")
    op = load_operator_profile("llama-2-70b", "h100-80gb")
    old = ReplicaSpec.from_memory(prof)
    new = ReplicaSpec.from_memory(prof, engine=EngineConfig(op, token_budget=2048))
    print(f"\n3. Azure 2023 conversation trace, first {len(reqs)} requests, 2 replicas, least-outstanding routing")
    print(f"   {'model':<28} {'ttft p99 s':>10} {'tpot p50 ms':>11} {'tbt p99 ms':>10} {'preempt':>7} {'wall s':>7}")
    rows = {}
    for name, spec in (("old (whole prefill)", old), ("engine (chunked, on demand)", new)):
        t0 = time.perf_counter()
        res = simulate(reqs, LeastOutstanding(), [spec, spec])
        wall = time.perf_counter() - t0
        tbt = res.tbt(0.99) if spec.engine else max(o.tpot_s for o in res.outcomes)
        rows[name] = (res.ttft(0.99), res.tpot(0.5), tbt)
        print(
            f"   {name:<28} {res.ttft(0.99):>10.3f} {res.tpot(0.5) * 1e3:>11.1f} {tbt * 1e3:>10.1f} "
            f"{res.preemptions:>7} {wall:>7.1f}"
        )
    a, b = rows.values()
    print(
        f"   old/engine ratio: ttft p99 {a[0] / b[0]:.2f}x, tpot p50 {a[1] / b[1]:.2f}x "
        "(the old model has no per-gap record: its tbt column is the largest mean TPOT)"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="parts 1 and 2 only")
    ap.add_argument("--requests", type=int, default=4000)
    args = ap.parse_args(argv)
    met, total = end_to_end()
    ok = validation()
    comparisons()
    if not args.quick:
        trace(args.requests)
    print(f"\npublished end-to-end points within 20%: {met} of {total}; held-out Vidur rows within 20%: {ok}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
