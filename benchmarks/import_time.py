"""Import cost of ``import accel`` against baselines measured in the same run.

Prints the cumulative microseconds that ``python -X importtime`` reports for ``accel`` and for
the baselines (the bare interpreter start, ``import json``, ``import pydantic``), median of
N runs, and the ratios.  ``import accel`` must not load a vendor library, stevedore or pydantic.
It also times the ``accel`` command itself: ``accel --help`` (which loads every command of the
``accel.commands`` group for its help line, but none of their implementations) and
``accel ls --sim dgx-h100``, against the bare interpreter start.

    python benchmarks/import_time.py [--runs 15]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys

VENDOR = ("pynvml", "amdsmi", "pyrsmi")


def cumulative_us(module: str) -> int:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"], capture_output=True, text=True, check=True
    )
    total = 0
    for line in proc.stderr.splitlines():
        m = re.match(r"import time:\s+\d+ \|\s+(\d+) \|\s?(\s*)(\S+)", line)
        if m and not m.group(2) and m.group(3) == module:
            total = int(m.group(1))
    return total


def wall_us(code: str, *args: str) -> float:
    import time

    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code, *args], check=True, stdout=subprocess.DEVNULL)
    return (time.perf_counter() - start) * 1e6


# The console script's own code: main() with the command line after the -c program.
CLI = "import sys; from accel.cli import main; raise SystemExit(main())"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    rows = {}
    for module in ("json", "pydantic", "accel"):
        rows[module] = statistics.median(cumulative_us(module) for _ in range(args.runs))
    bare = statistics.median(wall_us("pass") for _ in range(args.runs))
    with_accel = statistics.median(wall_us("import accel") for _ in range(args.runs))
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, accel; print(' '.join(sorted(sys.modules)))"],
        capture_output=True, text=True, check=True,
    ).stdout.split()
    print(f"median of {args.runs} runs, {sys.version.split()[0]}")
    for module, us in rows.items():
        print(f"  import {module:<9} {us / 1000:8.2f} ms cumulative (-X importtime)")
    print(f"  accel / json      {rows['accel'] / max(rows['json'], 1):8.2f}x")
    print(f"  accel / pydantic  {rows['accel'] / max(rows['pydantic'], 1):8.2f}x")
    print(f"  interpreter start {bare / 1000:8.2f} ms; with import accel {with_accel / 1000:8.2f} ms "
          f"(ratio {with_accel / bare:.2f}x)")
    for argv in (["--help"], ["ls", "--sim", "dgx-h100"]):
        cli = statistics.median(wall_us(CLI, *argv) for _ in range(args.runs))
        print(f"  accel {' '.join(argv):<22} {cli / 1000:8.2f} ms (ratio to the interpreter start {cli / bare:.2f}x)")
    heavy = [m for m in loaded if m.split(".")[0] in (*VENDOR, "stevedore", "pydantic")]
    print(f"  heavy or vendor modules loaded by 'import accel': {heavy or 'none'}")
    return 1 if heavy else 0


if __name__ == "__main__":
    raise SystemExit(main())
