"""Distance to the offline bound per policy, per trace, at 100% and 130% arrived.

    python benchmarks/openb/bound_distance.py benchmarks/openb/results/check-report

Reads ``curves.csv`` of a ``run_openb.py`` output folder and ``results/bound.csv``
(``bound_openb.py``; per trace and seed) and writes ``bound_distance.csv`` next to the curves:
per (trace, policy, arrived %) the mean allocation over the seeds run, the mean bound over the
*same* seeds, published FGD's mean, ``gap_to_bound`` = bound - ours, ``way_from_fgd`` = (ours -
published FGD) / (bound - published FGD) (1 = at the bound, 0 = published FGD, negative = below
it), and per seed: the smallest margin over published FGD's mean and over our own ``fgd`` on the
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


def load_bound(path: Path) -> dict[tuple[str, int, int], float]:
    out: dict[tuple[str, int, int], float] = {}
    if not path.exists():
        return out
    with open(path) as fh:
        for row in csv.DictReader(fh):
            out[(row["trace"], int(row["seed"]), int(row["arrived_pct"]))] = float(row["bound_pct"])
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
          f"{'way':>5} {'min-pub':>7} {'<pub':>4} {'min-own':>7} {'<own':>4}")
    for r in rows:
        print(f"{r['trace']:11} {r['arrived_pct']:>3} {r['policy']:16} {r['seeds']:>2} {f(r['ours']):>6} "
              f"{f(r['published_fgd']):>6} {f(r['bound']):>6} {f(r['gap_to_bound']):>5} {f(r['way_from_fgd']):>5} "
              f"{f(r['min_vs_published_fgd']):>7} {f(r['seeds_below_published_fgd']):>4} "
              f"{f(r['min_vs_own_fgd']):>7} {f(r['seeds_below_own_fgd']):>4}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", type=Path, help="a run_openb.py output folder (with curves.csv)")
    ap.add_argument("--bound", type=Path, default=HERE / "results" / "bound.csv")
    args = ap.parse_args()
    rows = distance_rows(load_curves(args.run / "curves.csv"), load_bound(args.bound))
    if not rows:
        print(f"no 100% / 130% rows in {args.run / 'curves.csv'}", file=sys.stderr)
        return 1
    write(rows, args.run / "bound_distance.csv")
    show(rows)
    print(f"wrote {args.run / 'bound_distance.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
