"""accel serve's API latency under a mixed load, against the framework's own trivial endpoint.

The service runs in this process (uvicorn in a thread, the live loop in another) over simulated
hosts at a high time scale; ``--jobs`` jobs are submitted and run to the end first (so the
journal and the service tables hold that many), then requests of a mix of submit / show / list
are sent at ``--rate`` per second for ``--seconds`` by a pool of client threads over loopback,
interleaved with requests to ``/healthz`` (the baseline: Starlette and uvicorn doing nothing).
It prints p50 / p99 of each and the ratio of the API's p99 to the baseline's.

Then quotes: a service over ``--quote-hosts`` 8-device hosts (:mod:`bench_quote_fixture`: every
host busy with a whole-host job) with ``--quote-queued`` jobs queued behind them answers
``POST /v1/quotes`` for 1- and 8-device jobs, one request at a time, alternating with
``/healthz`` (the baseline, in the same run).

    python benchmarks/service/bench_api.py                 # 10,000 jobs, 200 requests/s, 20 s; quotes 5,000 x 5,000
    python benchmarks/service/bench_api.py --quick         # 500 jobs, 50 requests/s, 5 s; quotes 500 x 500
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def _p(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] if len(values) >= 2 else values[0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--rate", type=float, default=200.0)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--hosts", default="dgx-h100,dgx-h100,rtx4090-4,rtx4090-4")
    ap.add_argument("--quote-hosts", type=int, default=5000)
    ap.add_argument("--quote-queued", type=int, default=5000)
    ap.add_argument("--quotes", type=int, default=60)
    ap.add_argument("--skip-api", action="store_true", help="only the quote part")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    if args.quick:
        args.jobs, args.rate, args.seconds = 500, 50.0, 5.0
        args.quote_hosts, args.quote_queued, args.quotes = 500, 500, 20
    if not args.skip_api:
        _api(args)
    _quotes(args)
    return 0


def _quotes(args: argparse.Namespace) -> None:
    from bench_quote_fixture import quote_service

    from accel.service._app import build_app
    from accel.service._auth import TokenBook
    from tests.service._svc import serving

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        svc, _who, _req = quote_service(Path(tmp) / "state", args.quote_hosts, args.quote_queued)
        print(f"quote service: {args.quote_hosts} hosts, {len(svc.engine.running())} running, "
              f"{len(svc.engine.queue())} queued (built in {time.perf_counter() - t0:.1f} s)")
        tokens = TokenBook(svc.store)
        token = tokens.create("team-a")
        lat: dict[str, list[float]] = {"baseline": [], "quote": []}
        with serving(build_app(svc, tokens, rate=1e6, burst=10**6)) as url, \
                httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as c:
            c.get("/v1/pools")  # the token's scrypt check, before measuring
            for i in range(args.quotes):
                start = time.perf_counter()
                r = c.get("/healthz")
                lat["baseline"].append((time.perf_counter() - start) * 1000.0)
                body = {"devices": 8 if i % 2 else 1, "duration_s": 3600}
                start = time.perf_counter()
                r = c.post("/v1/quotes", json=body)
                lat["quote"].append((time.perf_counter() - start) * 1000.0)
                assert r.status_code == 200 and r.json()["quotes"], r.text
        svc.close()
    for kind, vals in lat.items():
        print(f"  {kind:9s} n={len(vals):5d}  p50 {_p(vals, 50):7.1f} ms  p99 {_p(vals, 99):7.1f} ms")
    q99, b99 = _p(lat["quote"], 99), _p(lat["baseline"], 99)
    print(f"quote p99 {q99:.1f} ms vs baseline p99 {b99:.1f} ms: ratio {q99 / b99:.1f}; "
          f"target p99 < 200 ms: {'met' if q99 < 200 else 'NOT met'}")


def _api(args: argparse.Namespace) -> None:

    from accel.service._app import build_app
    from accel.service._auth import Principal, TokenBook, ensure_admin_token
    from accel.service._jobreq import EnvAllowlist, parse_request
    from tests.service._svc import open_service, serving

    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp) / "state"
        svc = open_service(state, time.time, profiles=args.hosts, scale=1e6)  # type: ignore[arg-type]
        tokens = TokenBook(svc.store)
        admin = (ensure_admin_token(state, tokens, svc.store) or state / "admin.token").read_text().strip()
        who = Principal("fill", "team-a", False)
        t0 = time.perf_counter()
        req = parse_request({"command": ["python", "x.py"], "devices": 1, "duration_s": 60}, EnvAllowlist())
        ids = []
        for i in range(args.jobs):
            ids.append(svc.submit(who, req))
            if i % 4 == 0:
                svc.tick()  # keep the queue short: the history is what this fills, not a backlog
        while any(svc.engine.jobs[j].state.value not in ("finished", "failed") for j in ids[-50:]):
            svc.tick()
            time.sleep(0.01)
        svc.tick()
        print(f"filled {args.jobs} jobs in {time.perf_counter() - t0:.1f} s; journal events "
              f"{svc.engine.journal.count()}")
        svc.start_loop()
        app = build_app(svc, tokens, rate=1e6, burst=10**6)
        lat: dict[str, list[float]] = {"baseline": [], "submit": [], "show": [], "list": []}
        errors = 0
        lock = threading.Lock()
        with serving(app) as url:
            local = threading.local()

            def client() -> httpx.Client:
                c = getattr(local, "c", None)
                if c is None:
                    c = local.c = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {admin}"},
                                               timeout=30)
                return c

            def one(kind: str) -> None:
                nonlocal errors
                c = client()
                start = time.perf_counter()
                if kind == "baseline":
                    r = c.get("/healthz")
                elif kind == "submit":
                    r = c.post("/v1/jobs", json={"command": ["python", "y.py"], "duration_s": 60})
                elif kind == "show":
                    r = c.get(f"/v1/jobs/{random.choice(ids)}")
                else:
                    r = c.get("/v1/jobs", params={"limit": 50})
                dt = time.perf_counter() - start
                with lock:
                    if r.status_code >= 400:
                        errors += 1
                    lat[kind].append(dt * 1000.0)

            # the token is checked with scrypt once, then remembered: warm that before measuring
            httpx.get(f"{url}/v1/pools", headers={"Authorization": f"Bearer {admin}"}, timeout=30)
            kinds = ["submit", "show", "show", "list", "baseline"]
            n = int(args.rate * args.seconds)
            with ThreadPoolExecutor(max_workers=32) as pool:
                begin = time.perf_counter()
                for i in range(n):
                    due = begin + i / args.rate
                    wait = due - time.perf_counter()
                    if wait > 0:
                        time.sleep(wait)
                    pool.submit(one, kinds[i % len(kinds)])
        svc.close()
    api = lat["submit"] + lat["show"] + lat["list"]
    base = lat["baseline"]
    print(f"{args.rate:g} requests/s for {args.seconds:g} s over loopback, {args.jobs} jobs in the journal, "
          f"{errors} errors")
    for kind, vals in lat.items():
        if vals:
            print(f"  {kind:9s} n={len(vals):5d}  p50 {_p(vals, 50):7.1f} ms  p99 {_p(vals, 99):7.1f} ms")
    a99, b99 = _p(api, 99), _p(base, 99)
    print(f"API p99 {a99:.1f} ms vs baseline p99 {b99:.1f} ms: ratio {a99 / b99:.1f}; "
          f"target p99 < 50 ms: {'met' if a99 < 50 else 'NOT met'}")


if __name__ == "__main__":
    sys.exit(main())
