"""Where the router's CPU goes per request: cProfile over the router's server thread, in process.

Two fake engines run as processes (``accel router fake-engine``); the router runs in this process
(:func:`accel.router.start_router`) with its uvicorn thread under cProfile, and an asyncio client on
the main thread sends ``--requests`` completions (``--concurrency`` at a time).  Printed: the
server thread's functions by cumulative and own time, and its CPU time per request (thread CPU
clock, so other load on the machine does not count).

    python benchmarks/router/profile_router.py --requests 2000 --top 30
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import re
import signal
import subprocess
import sys
import time

import httpx


def _spawn_engine() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", "accel", "router", "fake-engine", "--listen", "127.0.0.1:0",
                             "--model", "m", "--time-scale", "1000", "--max-num-seqs", "1024"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    found = re.search(r"http://127\.0\.0\.1:(\d+)", proc.stderr.readline())
    if found is None:
        proc.kill()
        raise SystemExit("the fake engine did not start")
    return proc, f"http://127.0.0.1:{found.group(1)}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--stream", action="store_true")
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args()

    from accel._net.fast_server import FastServer as BackgroundServer
    from accel.router import start_router

    # the thread's CPU clock, not the wall clock: on a loaded machine wall time lands wherever the
    # thread was preempted (a loopback send that wakes an engine, most often)
    prof = cProfile.Profile(time.thread_time)
    cpu: dict[str, float] = {}
    original = BackgroundServer._run

    def profiled(self: BackgroundServer) -> None:
        cpu["start"] = time.thread_time()
        prof.enable()
        try:
            original(self)
        finally:
            prof.disable()
            cpu["end"] = time.thread_time()

    BackgroundServer._run = profiled  # type: ignore[method-assign]
    engines = [_spawn_engine() for _ in range(2)]
    router = start_router([u for _, u in engines], policy="cache-aware")
    try:
        time.sleep(1.0)
        body = {"model": "m", "prompt": "The quick brown fox jumps over the lazy dog. " * 8, "max_tokens": 4,
                "stream": args.stream}

        async def run() -> int:
            sem = asyncio.Semaphore(args.concurrency)
            ok = 0
            async with httpx.AsyncClient(base_url=router.url, timeout=30) as client:
                async def one() -> None:
                    nonlocal ok
                    async with sem:
                        r = await client.post("/v1/completions", json=body)
                        ok += r.status_code == 200
                await asyncio.gather(*(one() for _ in range(args.requests)))
            return ok

        ok = asyncio.run(run())
    finally:
        router.close()
        for proc, _ in engines:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=10)
    stats = pstats.Stats(prof)
    stats.sort_stats("cumulative").print_stats(args.top)
    stats.sort_stats("tottime").print_stats(args.top)
    per = (cpu["end"] - cpu["start"]) / args.requests * 1e3
    print(f"{ok}/{args.requests} answered 200; router server thread CPU {per:.2f} ms a request (under cProfile)")
    return 0 if ok == args.requests else 1


if __name__ == "__main__":
    raise SystemExit(main())
