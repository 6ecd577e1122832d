"""Cost of one exporter scrape on the native path against the CLI path, over the same scenario.

For each vendor with two read paths it opens the backend twice on one shipped scenario
(``read=cli``: the recorded tool output is parsed; ``read=native``: the faithful fake of the same
recording is called through the ctypes signature table) and measures, in the same run:

* the processes a scrape would spawn on a real host (the source's ``tool_invocations``; the
  replay itself spawns none on either path);
* the CPU time of ``inventory()`` + ``telemetry()`` (``time.process_time``, median of N rounds
  of ``--scrapes`` scrapes each) and the ratio native / CLI.

The CLI path's cost here excludes the process spawn (a replay runs nothing), so the ratio is
conservative for the native path.  Run on a quiet machine for numbers to quote::

    python benchmarks/native_vs_cli.py [--rounds 5] [--scrapes 20]
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import time
from typing import Any

from accel.plugin import BackendConfig

#: vendor -> an 8-device (or larger) scenario of it.
SCENARIOS = {
    "ascend": "910b-8",
    "cambricon": "mlu5xx-8",
    "mthreads": "s5000-8",
    "iluvatar": "bi-v150-16",
    "metax": "c550-8",
    "kunlunxin": "p800-8",
    "enflame": "s60-2dev",  # the largest Enflame replay: 2 GCUs
    "hygon": "k100-8dcu",
}


def _scrape_cpu_s(backend: Any, scrapes: int) -> float:
    start = time.process_time()
    for _ in range(scrapes):
        backend.inventory()
        backend.telemetry()
    return time.process_time() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--scrapes", type=int, default=20)
    args = parser.parse_args()
    print(f"{'vendor':10} {'scenario':12} {'devs':>4} {'procs cli':>9} {'procs nat':>9} "
          f"{'cli ms':>8} {'native ms':>9} {'ratio':>6}")  # fmt: skip
    for vendor, scenario in SCENARIOS.items():
        plugin = importlib.import_module(f"accel.plugins.{vendor}").PLUGIN
        paths = {}
        for read in ("cli", "native"):
            backend = plugin.open(BackendConfig(options={"scenario": scenario, "read": read}))
            inv = backend.inventory()  # warm
            cpu = [_scrape_cpu_s(backend, args.scrapes) for _ in range(args.rounds)]
            paths[read] = (len(inv.devices), inv.sources[0].tool_invocations, statistics.median(cpu) / args.scrapes)
            backend.close()
        devs, procs_cli, cli_s = paths["cli"]
        _, procs_native, native_s = paths["native"]
        print(
            f"{vendor:10} {scenario:12} {devs:>4} {procs_cli!s:>9} {procs_native!s:>9} "
            f"{cli_s * 1e3:>8.2f} {native_s * 1e3:>9.2f} {native_s / cli_s:>6.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
