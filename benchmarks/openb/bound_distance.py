"""Distance to the offline bound per policy, per trace, at 100% and 130% arrived.

    python benchmarks/openb/bound_distance.py benchmarks/openb/results/check-report
    python benchmarks/openb/bound_distance.py --summary benchmarks/openb/results/summary.csv --seeds 42 ... 51

Reads ``curves.csv`` of a ``run_openb.py`` output folder and ``results/bound.csv``
(``bound_openb.py``; per trace and seed) and writes ``bound_distance.csv`` next to the curves:
per (trace, policy, arrived %) the mean allocation over the seeds run, the mean bound over the
*same* seeds, published FGD's mean, ``gap_to_bound`` = bound - ours, ``way_from_fgd`` = (ours -
published FGD) / (bound - published FGD) (1 = at the bound, 0 = published FGD, negative = below
it; the *gap closed*), and per seed: the smallest margin over published FGD's mean and over our own ``fgd`` on the
same seed (when ``fgd`` was run), and how many seeds fall below each.  Seeds without a bound row
are left out of the bound columns and counted in ``seeds_without_bound``.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run_openb import published  # noqa: E402

ARRIVED = (100, 130)


def load_curves(path: Path) -> dict[tuple[str, str, int, int], float]:
    out: dict[tuple[str, str, int, int], float] = {}
    with open(path) as fh:
        for row in csv.DictReader(fh):
            k = int(row["arrived_pct"])
            if k in ARRIVED:
                out[(row["trace"], row["policy"], int(row["seed"]), k)] = float(row["alloc_pct"])
    return out


def load_bound(*paths: Path) -> dict[tuple[str, int, int], float]:
    """(trace, seed, arrived %) -> bound % from ``bound_openb.py`` outputs; missing files are skipped.

    Two files giving different bounds for the same key is an error (they came from different code)."""
    out: dict[tuple[str, int, int], float] = {}
    for path in paths:
        if not path.exists():
            continue
        with open(path) as fh:
            for row in csv.DictReader(fh):
                key = (row["trace"], int(row["seed"]), int(row["arrived_pct"]))
                val = float(row["bound_pct"])
                if key in out and abs(out[key] - val) > 1e-9:
                    raise SystemExit(f"{path}: bound {val} for {key} differs from {out[key]} in another file")
                out[key] = val
    return out


def distance_rows(curves: dict[tuple[str, str, int, int], float],
                  bound: dict[tuple[str, int, int], float]) -> list[dict[str, Any]]:
    pub = published()
    by: dict[tuple[str, str, int], dict[int, float]] = defaultdict(dict)
    for (trace, pol, seed, k), v in curves.items():
        by[(trace, pol, k)][seed] = v
    rows: list[dict[str, Any]] = []
    for (trace, pol, k), seeds in sorted(by.items()):
        fgd_pub = pub.get((trace, "FGD", k))
        ours = sum(seeds.values()) / len(seeds)
        bs = {s: bound[(trace, s, k)] for s in seeds if (trace, s, k) in bound}
        b = sum(bs.values()) / len(bs) if bs else None
        ours_b = sum(seeds[s] for s in bs) / len(bs) if bs else None
        own = by.get((trace, "fgd", k), {})
        vs_own = [seeds[s] - own[s] for s in seeds if s in own]
        vs_pub = [v - fgd_pub for v in seeds.values()] if fgd_pub is not None else []
        way = None
        if b is not None and ours_b is not None and fgd_pub is not None and b > fgd_pub:
            way = (ours_b - fgd_pub) / (b - fgd_pub)
        rows.append({
            "trace": trace, "policy": pol, "arrived_pct": k, "seeds": len(seeds),
            "seed_list": " ".join(str(s) for s in sorted(seeds)), "ours": round(ours, 3),
            "published_fgd": fgd_pub, "bound": None if b is None else round(b, 3),
            "gap_to_bound": None if b is None or ours_b is None else round(b - ours_b, 3),
            "way_from_fgd": None if way is None else round(way, 3),
            "min_vs_published_fgd": round(min(vs_pub), 3) if vs_pub else None,
            "seeds_below_published_fgd": sum(v < 0 for v in vs_pub) if vs_pub else None,
            "min_vs_own_fgd": round(min(vs_own), 3) if vs_own else None,
            "seeds_below_own_fgd": sum(v < 0 for v in vs_own) if vs_own else None,
            "seeds_without_bound": len(seeds) - len(bs)})
    return rows


def write(rows: list[dict[str, Any]], out: Path) -> None:
    with open(out, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def show(rows: list[dict[str, Any]]) -> None:
    def f(v: float | int | None, p: int = 2) -> str:
        return "-" if v is None else (f"{v:.{p}f}" if isinstance(v, float) else str(v))
    print(f"{'trace':11} {'arr':>3} {'policy':16} {'n':>2} {'ours':>6} {'FGDpub':>6} {'bound':>6} {'gap':>5} "
          f"{'closed':>6} {'min-pub':>7} {'<pub':>4} {'min-own':>7} {'<own':>4}")
    for r in rows:
        print(f"{r['trace']:11} {r['arrived_pct']:>3} {r['policy']:16} {r['seeds']:>2} {f(r['ours']):>6} "
              f"{f(r['published_fgd']):>6} {f(r['bound']):>6} {f(r['gap_to_bound']):>5} {f(r['way_from_fgd']):>6} "
              f"{f(r['min_vs_published_fgd']):>7} {f(r['seeds_below_published_fgd']):>4} "
              f"{f(r['min_vs_own_fgd']):>7} {f(r['seeds_below_own_fgd']):>4}")


def annotate_summary(path: Path, bound: dict[tuple[str, int, int], float], seeds: list[int]) -> list[dict[str, Any]]:
    """Add ``bound_<k>`` / ``gap_closed_<k>`` to a ``summary.csv`` whose rows are means over ``seeds``
    (for a run whose ``curves.csv`` was not kept); every seed must have a bound."""
    pub = published()
    with open(path) as fh:
        rows: list[dict[str, Any]] = list(csv.DictReader(fh))
    for r in rows:
        if int(r["seeds"]) != len(seeds):
            raise SystemExit(f"{path}: {r['trace']} {r['policy']} is a mean over {r['seeds']} seeds, "
                             f"--seeds names {len(seeds)}")
        for k in ARRIVED:
            missing = [s for s in seeds if (r["trace"], s, k) not in bound]
            if missing:
                raise SystemExit(f"no bound for {r['trace']} seeds {missing} at {k}%")
            b = sum(bound[(r["trace"], s, k)] for s in seeds) / len(seeds)
            f = pub.get((r["trace"], "FGD", k))
            r[f"bound_{k}"] = round(b, 3)
            r[f"gap_closed_{k}"] = (None if f is None or b <= f
                                    else round((float(r[f"ours_{k}"]) - f) / (b - f), 3))
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", type=Path, nargs="?", help="a run_openb.py output folder (with curves.csv)")
    ap.add_argument("--summary", type=Path, help="instead: add the bound columns to this summary.csv "
                    "(its rows are means over --seeds)")
    ap.add_argument("--seeds", type=int, nargs="*", default=list(range(42, 52)))
    ap.add_argument("--bound", type=Path, nargs="*", default=[HERE / "results" / "bound.csv"],
                    help="bound_openb.py outputs (merged; default results/bound.csv)")
    args = ap.parse_args()
    if args.summary is not None:
        srows = annotate_summary(args.summary, load_bound(*args.bound), args.seeds)
        print(f"{'trace':11} {'policy':16} {'ours@100':>8} {'bound':>6} {'closed':>6} {'ours@130':>8} {'bound':>6} "
              f"{'closed':>6}")
        for r in srows:
            print(f"{r['trace']:11} {r['policy']:16} {float(r['ours_100']):8.2f} {r['bound_100']:6.2f} "
                  f"{'-' if r['gap_closed_100'] is None else format(r['gap_closed_100'], '.2f'):>6} "
                  f"{float(r['ours_130']):8.2f} {r['bound_130']:6.2f} "
                  f"{'-' if r['gap_closed_130'] is None else format(r['gap_closed_130'], '.2f'):>6}")
        print(f"wrote {args.summary}")
        return 0
    if args.run is None:
        ap.error("a run folder or --summary is needed")
    rows = distance_rows(load_curves(args.run / "curves.csv"), load_bound(*args.bound))
    if not rows:
        print(f"no 100% / 130% rows in {args.run / 'curves.csv'}", file=sys.stderr)
        return 1
    write(rows, args.run / "bound_distance.csv")
    show(rows)
    print(f"wrote {args.run / 'bound_distance.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
