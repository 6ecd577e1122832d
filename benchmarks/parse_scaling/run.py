"""Parse time against input size for every CLI plugin: flat per byte, or it is a finding.

For each CLI plugin, the main output of its first shipped scenario is read through the replay
path (open, ``inventory()``) at growing sizes, two ways:

* **size**: the whole output repeated k times (more rows, more tables; duplicates are reported
  as problems, which is parsing work too);
* **line**: one row of the output lengthened with spaces and text to L characters (up to the
  toolkit's line cap), the shape that made backtracking regexes quadratic.

The baseline is the smallest input of each series, measured in the same run; the printed ratio
is (time per byte at the largest input) / (time per byte at the baseline).  A linear parser
gives a ratio near 1 or below (fixed costs amortise); a quadratic one grows with the size
factor (32x, 64x).  Median of ``--repeat`` runs.

    python benchmarks/parse_scaling/run.py            # full
    python benchmarks/parse_scaling/run.py --quick    # CI smoke profile
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from accel.errors import AccelError  # noqa: E402
from accel.plugin import BackendConfig  # noqa: E402
from accel.toolkit._text import MAX_LINE_CHARS  # noqa: E402
from accel.tools import Recording, ReplayRunner  # noqa: E402

PLUGINS = ("ascend", "cambricon", "enflame", "hygon", "iluvatar", "kunlunxin", "metax", "mthreads")


def _scenario(plugin: str) -> tuple[Recording, ...]:
    mod = importlib.import_module(f"accel.plugins.{plugin}")
    assert mod.__file__ is not None
    root = Path(mod.__file__).parent / "scenarios"
    first = next(d for d in sorted(root.iterdir()) if d.is_dir() and any(d.glob("*.json")))
    return tuple(ReplayRunner(first)._table.values())


def _time(plugin: str, recs: tuple[Recording, ...], repeat: int) -> float:
    backend_plugin = importlib.import_module(f"accel.plugins.{plugin}").PLUGIN
    runs = []
    for _ in range(repeat):
        config = BackendConfig(runner=ReplayRunner.from_recordings(recs), enrich_from_sysfs=False, tool_timeout_s=600)
        start = time.perf_counter()
        try:
            with backend_plugin.open(config) as backend:
                backend.inventory()
        except AccelError:
            pass  # a refusal is parsing work too; the time is what is measured
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def _with(recs: tuple[Recording, ...], i: int, text: str) -> tuple[Recording, ...]:
    r = recs[i]
    return (*recs[:i], Recording(r.argv, stdout=text, stderr=r.stderr, returncode=r.returncode), *recs[i + 1 :])


def _lengthened(text: str, length: int) -> str:
    lines = text.splitlines()
    # The longest line with a digit (a device row), padded inside: row text, a gap, more text.
    j = max((k for k, ln in enumerate(lines) if any(c.isdigit() for c in ln)), key=lambda k: len(lines[k]))
    row = lines[j]
    pad = max(0, length - len(row) - 2)
    lines[j] = row[: len(row) // 2] + " " * pad + "x " + row[len(row) // 2 :]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, 3 repeats (CI)")
    parser.add_argument("--repeat", type=int, default=None)
    args = parser.parse_args(argv)
    repeat = args.repeat or (3 if args.quick else 7)
    factors = (1, 8) if args.quick else (1, 4, 16, 64)
    lengths = (256, MAX_LINE_CHARS) if args.quick else (256, 1024, 4096, MAX_LINE_CHARS)
    worst = 0.0
    print(f"{'plugin':10} {'series':6} {'baseline':>14} {'largest':>16} {'ratio':>6}")
    for plugin in PLUGINS:
        recs = _scenario(plugin)
        i = max(range(len(recs)), key=lambda k: len(recs[k].stdout))
        text = recs[i].stdout
        series = {
            "size": [(len(text) * k, _with(recs, i, text * k)) for k in factors],
            "line": [(len(_lengthened(text, n)), _with(recs, i, _lengthened(text, n))) for n in lengths],
        }
        for name, points in series.items():
            per_byte = [_time(plugin, r, repeat) / size for size, r in points]
            ratio = per_byte[-1] / per_byte[0]
            worst = max(worst, ratio)
            print(
                f"{plugin:10} {name:6} {per_byte[0] * 1e9:9.0f} ns/B  {per_byte[-1] * 1e9:9.0f} ns/B "
                f"x{points[-1][0] / points[0][0]:<4.0f} {ratio:6.2f}"
            )
    print(f"worst ratio (time per byte, largest input / baseline): {worst:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
