"""Run a fuzz campaign and print its counts: ``python -m tests.fuzz.run --mutations 50000``.

Prints one line per failure (non-accel exception, run over the time limit, reading outside
the model's bounds) with the number that reproduces it (``--only N`` with the same seed), and
a summary: runs, outcomes by kind, slowest run, wall time.  Exits 1 when anything failed.
"""

from __future__ import annotations

import argparse
import faulthandler
import sys

from tests.fuzz._engine import MAX_SECONDS, Run, campaign, cases


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz.run", description=__doc__.splitlines()[0])
    parser.add_argument("--mutations", type=int, default=2000, help="number of mutated runs (default 2000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", type=int, default=None, help="run only mutation number N (to reproduce)")
    parser.add_argument("--verbose", action="store_true", help="one line per run")
    parser.add_argument(
        "--watchdog", type=float, default=None, metavar="S",
        help="print every thread's stack to stderr when one run takes longer than S seconds",
    )
    args = parser.parse_args(argv)

    def start(number: int) -> None:
        if args.watchdog is not None:
            faulthandler.dump_traceback_later(args.watchdog, exit=False)
            print(f"> #{number}", file=sys.stderr, flush=True)

    def show(run: Run) -> None:
        if args.watchdog is not None:
            faulthandler.cancel_dump_traceback_later()
        failed = run.outcome.kind in ("escaped", "slow", "bounds")
        if failed or args.verbose:
            print(
                f"#{run.number} {run.outcome.kind} {run.outcome.seconds:.3f}s {run.case} [{run.recording}] "
                f"{run.mutator}: {run.outcome.detail}",
                flush=True,
            )

    print(f"{len(cases())} cases; limit {MAX_SECONDS:g} s per run; seed {args.seed}", flush=True)
    summary = campaign(args.mutations, seed=args.seed, only=args.only, on_run=show, on_start=start)
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(summary.by_kind.items()))
    print(f"runs {summary.runs}: {kinds}; failures {len(summary.failures)}; "
          f"slowest {summary.slowest:.3f} s; wall {summary.seconds:.1f} s")
    return 1 if summary.failures else 0


if __name__ == "__main__":
    sys.exit(main())
