"""What the conformance kit's pytest plugin costs a project that does not use it.

pytest loads every ``pytest11`` entry point of every installed distribution, so installing
accel adds ``accel.conformance.pytest_plugin`` to every pytest run on the machine.  This runs a
one-test file in a fresh project (a temporary directory with its own ``pytest.ini``) with the
plugin enabled and, as the baseline in the same run, with ``-p no:accel_conformance``,
alternating the two, and prints for each the median wall time and the median CPU time (user +
system of the pytest process: steadier than wall time on a busy machine), the differences and
the ratios.  It also checks that such a run loads none of the kit (``accel.conformance._*``).

    python benchmarks/pytest_plugin_cost.py [--runs 15]

Target: under 50 ms of difference.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PLUGIN = "accel_conformance"
TEST = "def test_one():\n    assert 1 + 1 == 2\n"
# Prints the kit modules a plain pytest run loaded (run in-process so sys.modules can be read).
PROBE = (
    "import sys, pytest\n"
    "code = pytest.main(['-q', '-p', 'no:cacheprovider', 'test_one.py'])\n"
    "kit = sorted(m for m in sys.modules\n"
    "             if m.startswith('accel.conformance.') and m != 'accel.conformance.pytest_plugin')\n"
    "print('KIT', ' '.join(kit))\n"
    "raise SystemExit(code)\n"
)


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)  # every child waited for so far
    return usage.ru_utime + usage.ru_stime


def _run(project: Path, *extra: str) -> tuple[float, float]:
    """Wall and CPU seconds of one pytest run."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra, "test_one.py"]
    cpu, start = _cpu(), time.perf_counter()
    proc = subprocess.run(cmd, cwd=project, capture_output=True, text=True)
    elapsed, cpu = time.perf_counter() - start, _cpu() - cpu
    if proc.returncode != 0:
        raise SystemExit(f"pytest failed ({proc.returncode}): {proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return elapsed, cpu


def _plugin_registered(project: Path) -> bool:
    proc = subprocess.run([sys.executable, "-m", "pytest", "--trace-config", "-q", "-p", "no:cacheprovider",
                           "test_one.py"], cwd=project, capture_output=True, text=True)
    return "accel.conformance.pytest_plugin" in proc.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15, help="runs of each variant (default 15)")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    with tempfile.TemporaryDirectory(prefix="accel-pytest-cost-") as tmp:
        project = Path(tmp)
        (project / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
        (project / "test_one.py").write_text(TEST, encoding="utf-8")
        if not _plugin_registered(project):
            print("the accel_conformance pytest11 plugin is not installed in this environment "
                  "(pip install -e .): nothing to measure", file=sys.stderr)
            return 1
        _run(project)  # warm the file cache and the bytecode of both variants
        _run(project, "-p", f"no:{PLUGIN}")
        with_plugin: list[tuple[float, float]] = []
        without: list[tuple[float, float]] = []
        for _ in range(args.runs):
            with_plugin.append(_run(project))
            without.append(_run(project, "-p", f"no:{PLUGIN}"))
        probe = subprocess.run([sys.executable, "-c", PROBE], cwd=project, capture_output=True, text=True)
        kit = next((line.split()[1:] for line in probe.stdout.splitlines() if line.startswith("KIT")), None)
    print(f"median of {args.runs} runs, one-test file in a fresh project, {sys.version.split()[0]}")
    print(f"  {'':44}{'wall':>10}{'CPU':>10}")
    medians = {}
    for label, runs in (("pytest with the accel_conformance plugin", with_plugin),
                        ("pytest -p no:accel_conformance (baseline)", without)):
        wall, cpu = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
        medians[label] = (wall, cpu)
        print(f"  {label:<44}{wall * 1000:7.1f} ms{cpu * 1000:7.1f} ms")
    (on_wall, on_cpu), (off_wall, off_cpu) = medians.values()
    print(f"  difference: wall {(on_wall - off_wall) * 1000:+.1f} ms (ratio {on_wall / off_wall:.3f}x), "
          f"CPU {(on_cpu - off_cpu) * 1000:+.1f} ms (ratio {on_cpu / off_cpu:.3f}x); target: under 50 ms")
    if kit is None:
        print(f"  could not read the modules the run loaded: {probe.stdout[-500:]}{probe.stderr[-500:]}")
        return 1
    print(f"  kit modules loaded by a run that does not use it: {' '.join(kit) or 'none'}")
    return 1 if kit else 0


if __name__ == "__main__":
    raise SystemExit(main())
