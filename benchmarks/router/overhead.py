"""Router overhead: latency added by ``accel router`` at a fixed request rate, against direct
requests to the same fake engines, measured in one run.

Two fake engines (``accel router fake-engine``, fast time scale so that the engine's own time is
small and steady) and one router (``accel router``) run as processes on loopback.  An open-loop
client sends requests at ``--rate`` per second (each at its scheduled time, whether or not the
previous ones answered), alternating phases: *direct* (round robin straight to the engines) and
*routed* (through the router), ``--rounds`` times each, so that drift in the machine's load falls
on both.  Latency is send to last byte.  Printed: each side's p50 / p99 / max, the achieved rate,
the added p99 (routed - direct) and the ratio routed / direct, and failures (must be 0).

    python benchmarks/router/overhead.py                      # 500 req/s, 3 rounds of 4 s each side
    python benchmarks/router/overhead.py --rate 200 --policy round-robin --stream

Goal (issue 36): p99 added under 2 ms at 500 requests/s.  On a loaded 2-core machine the client,
the router and both engines share the cores, so the figure there is an upper bound.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx


def _spawn(args: list[str]) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", "accel", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    line = proc.stderr.readline()
    found = re.search(r"http://127\.0\.0\.1:(\d+)", line)
    if found is None:
        proc.kill()
        raise SystemExit(f"did not start: {' '.join(args)}: {line!r}")
    return proc, f"http://127.0.0.1:{found.group(1)}"


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


async def _phase(targets: list[str], rate: float, seconds: float, body: dict[str, object],
                 stream: bool) -> tuple[list[float], int, float]:
    n = int(rate * seconds)
    lat: list[float] = []
    failures = 0
    limits = httpx.Limits(max_connections=512, max_keepalive_connections=512)
    async with httpx.AsyncClient(timeout=30, limits=limits) as client:
        async def one(i: int, at: float) -> None:
            nonlocal failures
            delay = at - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            url = targets[i % len(targets)] + "/v1/completions"
            t0 = time.perf_counter()
            try:
                if stream:
                    async with client.stream("POST", url, json=body) as r:
                        data = await r.aread()
                        ok = r.status_code == 200 and data.rstrip().endswith(b"[DONE]")
                else:
                    r = await client.post(url, json=body)
                    ok = r.status_code == 200
            except httpx.HTTPError:
                ok = False
            if ok:
                lat.append(time.perf_counter() - t0)
            else:
                failures += 1

        # warm the connections, then the measured phase
        await asyncio.gather(*(one(i, 0.0) for i in range(min(50, n))))
        lat.clear()
        start = time.perf_counter() + 0.05
        await asyncio.gather(*(one(i, start + i / rate) for i in range(n)))
        elapsed = time.perf_counter() - start
    return lat, failures, n / elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=float, default=500.0)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--policy", default="cache-aware")
    ap.add_argument("--time-scale", type=float, default=1000.0)
    ap.add_argument("--max-tokens", type=int, default=4)
    ap.add_argument("--stream", action="store_true")
    ap.add_argument("--out", default=None, help="write the results as JSON here")
    args = ap.parse_args()
    procs = []
    try:
        engines = []
        for _ in range(2):
            proc, url = _spawn(["router", "fake-engine", "--listen", "127.0.0.1:0", "--model", "m",
                                "--time-scale", str(args.time_scale), "--max-num-seqs", "1024"])
            procs.append(proc)
            engines.append(url)
        proc, router = _spawn(["router", "--listen", "127.0.0.1:0", "--policy", args.policy,
                               "--autoscaler", "none", *[x for u in engines for x in ("--backend", u)]])
        procs.append(proc)
        time.sleep(1.5)  # the router's first health checks
        body: dict[str, object] = {"model": "m", "prompt": "The quick brown fox jumps over the lazy dog. " * 8,
                                   "max_tokens": args.max_tokens, "stream": args.stream}
        sides: dict[str, list[float]] = {"direct": [], "routed": []}
        fails = {"direct": 0, "routed": 0}
        rates: dict[str, list[float]] = {"direct": [], "routed": []}
        cpu: dict[str, float] = {"direct": 0.0, "routed": 0.0}
        router_pid = procs[-1].pid
        for _ in range(args.rounds):
            for side, targets in (("direct", engines), ("routed", [router])):
                before = _cpu_s(router_pid), sum(_cpu_s(p.pid) for p in procs[:2])
                lat, failed, achieved = asyncio.run(_phase(targets, args.rate, args.seconds, body, args.stream))
                after = _cpu_s(router_pid), sum(_cpu_s(p.pid) for p in procs[:2])
                cpu["routed"] += after[0] - before[0]
                cpu["direct" if side == "direct" else "engines_routed"] = (
                    cpu.get("direct" if side == "direct" else "engines_routed", 0.0) + after[1] - before[1])
                sides[side] += lat
                fails[side] += failed
                rates[side].append(achieved)
        result: dict[str, object] = {"rate": args.rate, "policy": args.policy, "stream": args.stream,
                                     "cpus": os.cpu_count(), "load_avg_1m": os.getloadavg()[0]}
        print(f"router overhead at {args.rate:g} req/s, policy {args.policy}, stream {args.stream}, "
              f"{args.rounds} rounds x {args.seconds:g} s a side, {os.cpu_count()} CPUs, "
              f"load average {os.getloadavg()[0]:.1f}")
        print(f"{'side':8} {'requests':>8} {'failed':>6} {'rate/s':>7} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
        for side, lat in sides.items():
            p50, p99, mx = _pct(lat, 0.5) * 1e3, _pct(lat, 0.99) * 1e3, max(lat) * 1e3
            achieved = sum(rates[side]) / len(rates[side])
            result[side] = {"requests": len(lat), "failed": fails[side], "achieved_rate": achieved,
                            "p50_ms": p50, "p99_ms": p99, "max_ms": mx}
            print(f"{side:8} {len(lat):8d} {fails[side]:6d} {achieved:7.0f} {p50:8.2f} {p99:8.2f} {mx:8.2f}")
        d, r = result["direct"], result["routed"]
        assert isinstance(d, dict) and isinstance(r, dict)
        added50, added99 = r["p50_ms"] - d["p50_ms"], r["p99_ms"] - d["p99_ms"]
        result.update(added_p50_ms=added50, added_p99_ms=added99, p99_ratio=r["p99_ms"] / d["p99_ms"])
        routed_n = r["requests"] + r["failed"] + 50 * args.rounds  # the warm-up requests count too
        direct_n = d["requests"] + d["failed"] + 50 * args.rounds
        router_ms = cpu["routed"] / routed_n * 1e3
        engine_ms = cpu["direct"] / direct_n * 1e3
        result.update(router_cpu_ms_per_request=router_ms, engines_cpu_ms_per_request=engine_ms)
        print(f"CPU per request: router {router_ms:.2f} ms, engines {engine_ms:.2f} ms (so one router core "
              f"carries about {1000 / router_ms:.0f} requests/s)")
        print(f"added: p50 {added50:+.2f} ms, p99 {added99:+.2f} ms; p99 ratio routed/direct "
              f"{r['p99_ms'] / d['p99_ms']:.2f}x (goal: p99 added < 2 ms)")
        if args.out:
            Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
        return 0 if fails["routed"] == 0 and fails["direct"] == 0 else 1
    finally:
        for p in procs:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGTERM)
        for p in procs:
            p.wait(timeout=10)
            if p.stderr is not None:
                p.stderr.close()


if __name__ == "__main__":
    raise SystemExit(main())
