"""Router overhead: latency and CPU added by ``accel router`` at a fixed request rate, against
direct requests to the same fake engines, measured in one run.

Two fake engines (``accel router fake-engine``, fast time scale so that the engine's own time is
small and steady) and one router (``accel router``) run as processes on loopback.  An open-loop
client (aiohttp, one process) sends requests at ``--rate`` per second (each at its scheduled time,
whether or not the previous ones answered), alternating phases: *direct* (round robin straight to
the engines) and *routed* (through the router), ``--rounds`` times each, so that drift in the
machine's load falls on both.  Latency is send to last byte.  Printed: each side's p50 / p99 / max,
the achieved rate, the added p99 (routed - direct) and the ratio routed / direct, failures (must
be 0), and the CPU time per request of the router and of the engines, from ``/proc/PID/stat`` (so
it does not depend on what else the machine runs).  The router's CPU a request is counted over
its routed phases, less its background (health checks and metric scrapes of the engines: its CPU
rate during the direct phases, when it routes nothing).

``--compare DIR`` runs a second router from another source tree (``DIR/accel``, e.g. ``main``'s,
``git -C REPO archive main accel | tar -x -C DIR``) as a third side, *routed-compare*, in the same
rounds: an A/B of two versions of the router on the same engines, client and machine load.

    python benchmarks/router/overhead.py --rate 500                 # the goal's load
    python benchmarks/router/overhead.py --rate 200 --policy round-robin --stream
    python benchmarks/router/overhead.py --rate 150 --compare /tmp/main-tree --out results/ab.json

Goal (issue 36): p99 added under 2 ms at 500 requests/s.  On a loaded 2-core machine the client,
the router and both engines share the cores, so the figure there is an upper bound.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import aiohttp

WARMUP = 50  # requests a phase sends before its measured part (connections opened, code paths warm)
CONNECTIONS = 512


def _spawn(args: list[str], source: str | None = None) -> tuple[subprocess.Popen[str], str]:
    # `python -m` puts its working directory first on the path: run there for another tree's accel
    proc = subprocess.Popen([sys.executable, "-m", "accel", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, cwd=source)
    assert proc.stderr is not None
    line = proc.stderr.readline()
    if source is not None:
        print(f"from {source}: {line.strip()}")
    found = re.search(r"http://127\.0\.0\.1:(\d+)", line)
    if found is None:
        proc.kill()
        raise SystemExit(f"did not start: {' '.join(args)}: {line!r}")
    return proc, f"http://127.0.0.1:{found.group(1)}"


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux /proc)."""
    return sum(_cpu_split_s(pid))


def _cpu_split_s(pid: int) -> tuple[float, float]:
    """User and system CPU seconds of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def _pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


async def _phase(targets: list[str], rate: float, seconds: float, body: bytes, stream: bool,
                 why: dict[str, int]) -> tuple[list[float], int, float]:
    n = int(rate * seconds)
    lat: list[float] = []
    failures = 0
    # at most CONNECTIONS open at a time, to the router or to the two engines together (past that requests
    # wait in the client, both sides alike): under the servers' own limit (1024, then 503s)
    connector = aiohttp.TCPConnector(limit=CONNECTIONS)
    headers = {"content-type": "application/json"}
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=30)) as client:
        async def one(i: int, at: float) -> None:
            nonlocal failures
            delay = at - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            url = targets[i % len(targets)] + "/v1/completions"
            t0 = time.perf_counter()
            try:
                async with client.post(url, data=body, headers=headers) as r:
                    data = await r.read()
                    ok = r.status == 200 and (not stream or data.rstrip().endswith(b"[DONE]"))
                    what = f"HTTP {r.status}" if r.status != 200 else "incomplete stream"
                    if not ok and not why:  # the first failure's answer, to say what it was
                        why["first: " + data[:300].decode("utf-8", "replace")] = 1
            except (aiohttp.ClientError, TimeoutError) as exc:
                ok, what = False, type(exc).__name__
            if ok:
                lat.append(time.perf_counter() - t0)
            else:
                failures += 1
                why[what] = why.get(what, 0) + 1

        # warm the connections, then the measured phase
        await asyncio.gather(*(one(i, 0.0) for i in range(min(WARMUP, n))))
        lat.clear()
        failures = 0
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
    ap.add_argument("--compare", default=None, metavar="DIR",
                    help="also route through a router run from DIR/accel (another version), as a third side")
    ap.add_argument("--out", default=None, help="write the results as JSON here")
    ap.add_argument("--py-spy", default=None, metavar="FILE",
                    help="sample the (first) router with py-spy while it runs, only when it holds the GIL (its CPU, "
                         "not its waits); FILE: collapsed stacks (py-spy's raw format, one stack and its count a line)")
    args = ap.parse_args()
    if args.py_spy and shutil.which("py-spy") is None:
        raise SystemExit("--py-spy needs py-spy on the PATH (pip install py-spy)")
    procs: list[subprocess.Popen[str]] = []
    try:
        engines = []
        for _ in range(2):
            proc, url = _spawn(["router", "fake-engine", "--listen", "127.0.0.1:0", "--model", "m",
                                "--time-scale", str(args.time_scale), "--max-num-seqs", "1024"])
            procs.append(proc)
            engines.append(url)
        router_args = ["router", "--listen", "127.0.0.1:0", "--policy", args.policy, "--autoscaler", "none",
                       *[x for u in engines for x in ("--backend", u)]]
        routers: dict[str, tuple[subprocess.Popen[str], str]] = {"routed": _spawn(router_args)}
        if args.compare:
            routers["routed-compare"] = _spawn(router_args, source=str(Path(args.compare).resolve()))
        procs += [p for p, _ in routers.values()]
        time.sleep(1.5)  # the routers' first health checks
        spy = None
        if args.py_spy:
            spy = subprocess.Popen(["py-spy", "record", "--gil", "--nonblocking", "-r", "200", "-f", "raw", "-o",
                                    args.py_spy, "-p", str(routers["routed"][0].pid)], stdout=subprocess.DEVNULL)
        body = json.dumps({"model": "m", "prompt": "The quick brown fox jumps over the lazy dog. " * 8,
                           "max_tokens": args.max_tokens, "stream": args.stream}).encode()
        sides: list[tuple[str, list[str]]] = [("direct", engines)] + [(k, [u]) for k, (_, u) in routers.items()]
        lat: dict[str, list[float]] = {k: [] for k, _ in sides}
        fails = dict.fromkeys(lat, 0)
        why: dict[str, dict[str, int]] = {k: {} for k in lat}
        rates: dict[str, list[float]] = {k: [] for k in lat}
        sent = dict.fromkeys(lat, 0)
        # CPU seconds of each router while it routes, and while another side runs (its background)
        busy = dict.fromkeys(routers, 0.0)
        busy_sys = dict.fromkeys(routers, 0.0)  # of which in the kernel (loopback TCP, epoll)
        busy_s = dict.fromkeys(routers, 0.0)
        idle = dict.fromkeys(routers, 0.0)
        idle_s = dict.fromkeys(routers, 0.0)
        engines_cpu = 0.0
        for _ in range(args.rounds):
            for side, targets in sides:
                t0 = time.perf_counter()
                before = {k: _cpu_split_s(p.pid) for k, (p, _) in routers.items()}
                eng0 = sum(_cpu_s(p.pid) for p in procs[:2])
                got, failed, achieved = asyncio.run(_phase(targets, args.rate, args.seconds, body, args.stream,
                                                          why[side]))
                eng1 = sum(_cpu_s(p.pid) for p in procs[:2])
                took = time.perf_counter() - t0
                for k, (p, _) in routers.items():
                    now_user, now_sys = _cpu_split_s(p.pid)
                    used = now_user + now_sys - sum(before[k])
                    if k == side:
                        busy[k] += used
                        busy_sys[k] += now_sys - before[k][1]
                        busy_s[k] += took
                    else:
                        idle[k] += used
                        idle_s[k] += took
                if side == "direct":
                    engines_cpu += eng1 - eng0
                lat[side] += got
                fails[side] += failed
                rates[side].append(achieved)
                sent[side] += int(args.rate * args.seconds) + min(WARMUP, int(args.rate * args.seconds))
        if spy is not None:
            spy.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
            spy.wait(timeout=60)
        # the routers' own counters of trouble (retries, breakers opened, answers that were not 200)
        trouble: dict[str, list[str]] = {}
        for k, (_, u) in routers.items():
            with urllib.request.urlopen(u + "/metrics", timeout=10) as page:
                text = page.read().decode()
            trouble[k] = [line for line in text.splitlines() if not line.startswith("#") and (
                "retries_total" in line or "circuit_opened_total" in line or "stream_errors_total" in line
                or ("requests_total" in line and 'code="200"' not in line)) and not line.endswith(" 0.0")]
        load = os.getloadavg()[0]
        result: dict[str, object] = {"rate": args.rate, "policy": args.policy, "stream": args.stream,
                                     "cpus": os.cpu_count(), "load_avg_1m": load, "rounds": args.rounds,
                                     "seconds": args.seconds}
        print(f"router overhead at {args.rate:g} req/s, policy {args.policy}, stream {args.stream}, "
              f"{args.rounds} rounds x {args.seconds:g} s a side, {os.cpu_count()} CPUs, load average {load:.1f}")
        print(f"{'side':15} {'requests':>8} {'failed':>6} {'rate/s':>7} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
        for side, got in lat.items():
            p50, p99, mx = _pct(got, 0.5) * 1e3, _pct(got, 0.99) * 1e3, max(got) * 1e3
            achieved = sum(rates[side]) / len(rates[side])
            result[side] = {"requests": len(got), "failed": fails[side], "failures": why[side],
                            "achieved_rate": achieved,
                            "p50_ms": p50, "p99_ms": p99, "max_ms": mx}
            print(f"{side:15} {len(got):8d} {fails[side]:6d} {achieved:7.0f} {p50:8.2f} {p99:8.2f} {mx:8.2f}"
                  + (f"  failures: {why[side]}" if why[side] else ""))
        for k, lines in trouble.items():
            result.setdefault(k, {})
            if lines:
                print(f"{k} router's counters of trouble: " + "; ".join(lines))
        d = result["direct"]
        assert isinstance(d, dict)
        engine_ms = engines_cpu / sent["direct"] * 1e3
        result["engines_cpu_ms_per_request"] = engine_ms
        print(f"engines CPU per request: {engine_ms:.2f} ms")
        for side in routers:
            r = result[side]
            assert isinstance(r, dict)
            background = idle[side] / idle_s[side] if idle_s[side] else 0.0  # CPU s per s
            raw_ms = busy[side] / sent[side] * 1e3
            net_ms = max(0.0, busy[side] - background * busy_s[side]) / sent[side] * 1e3
            added50, added99 = r["p50_ms"] - d["p50_ms"], r["p99_ms"] - d["p99_ms"]
            r.update(added_p50_ms=added50, added_p99_ms=added99, p99_ratio=r["p99_ms"] / d["p99_ms"],
                     router_cpu_ms_per_request=net_ms, router_cpu_ms_per_request_with_background=raw_ms,
                     router_background_cpu_ms_per_s=background * 1e3,
                     router_system_cpu_share=busy_sys[side] / busy[side] if busy[side] else None,
                     router_trouble=trouble[side])
            kernel = busy_sys[side] / max(busy[side], 1e-9)
            print(f"{side}: router CPU per request {net_ms:.2f} ms ({raw_ms:.2f} with its background of "
                  f"{background * 1e3:.1f} ms/s, {kernel:.0%} in the kernel; one core carries about "
                  f"{1000 / max(net_ms, 1e-3):.0f} requests/s); "
                  f"added p50 {added50:+.2f} ms, p99 {added99:+.2f} ms; p99 ratio {r['p99_ms'] / d['p99_ms']:.2f}x "
                  "(goal: p99 added < 2 ms)")
        if args.compare:
            a, b = result["routed"], result["routed-compare"]
            assert isinstance(a, dict) and isinstance(b, dict)
            ratio = b["router_cpu_ms_per_request"] / max(a["router_cpu_ms_per_request"], 1e-9)
            result["compare_cpu_ratio"] = ratio
            print(f"router CPU per request, compare / this tree: {ratio:.2f}x")
        if args.out:
            Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
        return 0 if not any(fails.values()) else 1
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
