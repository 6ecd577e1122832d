"""accel serve's API latency under a mixed load, against the framework's own trivial endpoint.

The API part: ``--jobs`` jobs of four tenants are submitted and run to the end first (so the
journal and the service tables hold that many), then a real ``accel serve --sim`` is started in
its own process over that state, and this process (the load generator, asyncio + aiohttp) sends an
open loop of ``--rate`` API requests per second for ``--seconds`` over loopback: submit / show /
list in the ratio 1 : 2 : 1 with tenant tokens, plus ``/healthz`` (the baseline: Starlette and
uvicorn doing nothing) at a quarter of that rate, interleaved, in the same run.  It prints p50 /
p99 of each kind and its ratio to the baseline's p99.  ``--compare DIR`` runs the same load
against the ``accel serve`` of another source tree (``git archive main | tar -x -C DIR``) over a
copy of the same state, after this tree's; ``--profile FILE`` runs this tree's server under
cProfile (every thread) and prints where its time went.

Then quotes: a service over ``--quote-hosts`` 8-device hosts (:mod:`bench_quote_fixture`: every
host busy with a whole-host job) with ``--quote-queued`` jobs queued behind them answers
``POST /v1/quotes`` for 1- and 8-device jobs, one request at a time, alternating with
``/healthz`` (the baseline, in the same run).

    python benchmarks/service/bench_api.py                 # 10,000 jobs, 200 requests/s, 20 s; quotes 5,000 x 5,000
    python benchmarks/service/bench_api.py --quick         # 500 jobs, 50 requests/s, 5 s; quotes 500 x 500
    python benchmarks/service/bench_api.py --skip-quotes --compare /tmp/main --profile /tmp/serve.prof
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

TENANTS = ("team-a", "team-b", "team-c", "team-d")


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
    ap.add_argument("--scale", type=float, default=1e6, help="the service's --time-scale (sim jobs end at once)")
    ap.add_argument("--compare", action="append", default=[], metavar="DIR",
                    help="also run the load against the accel serve of this source tree (same state, same load)")
    ap.add_argument("--profile", default=None, metavar="FILE",
                    help="run this tree's server under cProfile (every thread), write FILE, print the top")
    ap.add_argument("--fill-cache", default=None, metavar="DIR",
                    help="keep the filled state (and its ids) in DIR and reuse it when it matches")
    ap.add_argument("--skip-api", action="store_true", help="only the quote part")
    ap.add_argument("--skip-quotes", action="store_true", help="only the API part")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    if args.quick:
        args.jobs, args.rate, args.seconds = 500, 50.0, 5.0
        args.quote_hosts, args.quote_queued, args.quotes = 500, 500, 20
    if not args.skip_api:
        _api(args)
    if not args.skip_quotes:
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


def _fill(state: Path, args: argparse.Namespace) -> dict[str, list[str]]:
    """``args.jobs`` finished jobs of four tenants in a new state directory; returns the ids per tenant."""
    from accel.service._auth import Principal
    from accel.service._jobreq import EnvAllowlist, parse_request
    from tests.service._svc import open_service

    svc = open_service(state, time.time, profiles=args.hosts, scale=args.scale)  # type: ignore[arg-type]
    try:
        t0 = time.perf_counter()
        req = parse_request({"command": ["python", "x.py"], "devices": 1, "duration_s": 60}, EnvAllowlist())
        ids: dict[str, list[str]] = {t: [] for t in TENANTS}
        last: list[str] = []
        for i in range(args.jobs):
            tenant = TENANTS[i % len(TENANTS)]
            job = svc.submit(Principal("fill", tenant, False), req)
            ids[tenant].append(job)
            last = [*last[-49:], job]
            if i % 4 == 0:
                svc.tick()  # keep the queue short: the history is what this fills, not a backlog
        while any(svc.engine.jobs[j].state.value not in ("finished", "failed") for j in last):
            svc.tick()
            time.sleep(0.01)
        svc.tick()
        print(f"filled {args.jobs} jobs of {len(TENANTS)} tenants in {time.perf_counter() - t0:.1f} s; journal "
              f"events {svc.engine.journal.count()}", flush=True)
    finally:
        svc.close()
    return ids


def _cached_fill(filled: Path, args: argparse.Namespace) -> dict[str, list[str]]:
    """:func:`_fill`, or a copy of the same fill kept in ``--fill-cache`` (same jobs, hosts, scale)."""
    import json

    key = f"{args.jobs}-{args.hosts}-{args.scale:g}".replace(",", "_")
    cache = Path(args.fill_cache) / key if args.fill_cache else None
    if cache is not None and (cache / "ids.json").is_file():
        shutil.copytree(cache / "state", filled)
        print(f"filled state from {cache}", flush=True)
        return dict(json.loads((cache / "ids.json").read_text()))
    ids = _fill(filled, args)
    if cache is not None:
        shutil.rmtree(cache, ignore_errors=True)
        shutil.copytree(filled, cache / "state")
        (cache / "ids.json").write_text(json.dumps(ids))
    return ids


def _start_server(src: Path, state: Path, args: argparse.Namespace, log: Path, profile: Path | None
                  ) -> tuple[subprocess.Popen[bytes], str]:
    """``accel serve`` of the tree ``src`` in its own process over ``state``; returns it and its URL."""
    from tests.service._svc import free_port

    port = free_port()
    serve = ["serve", "--state", str(state), "--sim", args.hosts, "--time-scale", repr(args.scale),
             "--listen", f"127.0.0.1:{port}", "--rate", "1e9", "--burst", str(10**9)]
    cmd = [sys.executable, "-m", "accel", *serve]
    if profile is not None:
        cmd = [sys.executable, str(Path(__file__).resolve().parent / "_profiled.py"), str(profile), *serve]
    env = {**os.environ, "PYTHONPATH": str(src)}
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=str(src), env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    end = time.monotonic() + 120
    while True:
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > end:
            proc.kill()
            raise SystemExit(f"accel serve did not start; its log:\n{log.read_text()[-4000:]}")
        time.sleep(0.1)


def _stop_server(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGINT)  # uvicorn's graceful stop: the service closes, a profile is written
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


async def _load(url: str, tokens: dict[str, str], ids: dict[str, list[str]], args: argparse.Namespace
                ) -> tuple[dict[str, list[float]], dict[str, int]]:
    """Open loop: request i is sent at ``begin + i / rate`` whatever the answers before it did,
    and its latency counts from then (a late send is the service's delay too, no coordinated
    omission).  Of every 5 requests: 1 submit, 2 show, 1 list (of a tenant's token each, round
    robin over the tenants), 1 ``/healthz`` (the baseline); ``args.rate`` counts the API's."""
    kinds = ["submit", "show", "baseline", "list", "show"]
    total = int(args.rate * args.seconds * len(kinds) / (len(kinds) - 1))
    step = args.seconds / total
    lat: dict[str, list[float]] = {k: [] for k in ("baseline", "submit", "show", "list")}
    errors: dict[str, int] = {k: 0 for k in lat}
    rng = random.Random(7)
    names = list(tokens)
    auth = {t: {"Authorization": f"Bearer {tok}"} for t, tok in tokens.items()}
    # aiohttp, not httpx: httpx's pool costs the generator milliseconds a request at 250/s, and a
    # generator that falls behind measures itself (the router's benchmark found the same)
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(url, connector=aiohttp.TCPConnector(limit=256), timeout=timeout) as client:
        async def one(i: int, due: float) -> None:
            kind = kinds[i % len(kinds)]
            tenant = names[(i // len(kinds)) % len(names)]
            try:
                if kind == "baseline":
                    req = client.get("/healthz")
                elif kind == "submit":
                    req = client.post("/v1/jobs", json={"command": ["python", "y.py"], "duration_s": 60},
                                      headers=auth[tenant])
                elif kind == "show":
                    req = client.get(f"/v1/jobs/{rng.choice(ids[tenant])}", headers=auth[tenant])
                else:
                    req = client.get("/v1/jobs", params={"limit": "50"}, headers=auth[tenant])
                async with req as r:
                    await r.read()
                    ok = r.status < 400
            except (TimeoutError, aiohttp.ClientError):
                ok = False
            lat[kind].append((time.perf_counter() - due) * 1000.0)
            if not ok:
                errors[kind] += 1

        for tenant in names:  # each token's one scrypt check, before measuring
            async with client.get("/v1/pools", headers=auth[tenant]) as r:
                await r.read()
        tasks = []
        begin = time.perf_counter() + 0.05
        for i in range(total):
            due = begin + i * step
            wait = due - time.perf_counter()
            if wait > 0:
                await asyncio.sleep(wait)
            tasks.append(asyncio.create_task(one(i, due)))
        await asyncio.gather(*tasks)
    return lat, errors


def _api(args: argparse.Namespace) -> None:
    from accel.service._auth import TokenBook
    from accel.service._store import ServiceStore

    runs = [("this tree", ROOT)] + [(f"{p}", Path(p).resolve()) for p in args.compare]
    with tempfile.TemporaryDirectory() as tmp:
        filled = Path(tmp) / "filled"
        ids = _cached_fill(filled, args)
        store = ServiceStore(filled / "service.sqlite")
        try:
            tokens = {t: TokenBook(store).create(t) for t in TENANTS}
        finally:
            store.close()
        results = []
        for label, src in runs:
            state = Path(tmp) / f"state-{len(results)}"
            shutil.copytree(filled, state)
            profile = Path(args.profile) if args.profile and src == ROOT else None
            proc, url = _start_server(src, state, args, Path(tmp) / f"serve-{len(results)}.log", profile)
            try:
                cpu0 = _cpu_s(proc.pid)
                lat, errors = asyncio.run(_load(url, tokens, ids, args))
                cpu = _cpu_s(proc.pid) - cpu0
            finally:
                _stop_server(proc)
            results.append((label, src, lat, errors, cpu))
            if profile is not None and profile.exists():
                print(f"server profile (cProfile of every thread) in {profile}; top by own time:")
                _print_profile(profile)
    print(f"{args.rate:g} API requests/s (submit : show : list = 1 : 2 : 1, tenant tokens) plus /healthz at "
          f"{args.rate / 4:g}/s, {args.seconds:g} s, open loop, over loopback to `accel serve --sim {args.hosts}` "
          f"in its own process; {args.jobs} jobs in the journal")
    for label, src, lat, errors, cpu in results:
        base99 = _p(lat["baseline"], 99)
        n = sum(len(v) for v in lat.values())
        print(f"{label} ({src}): server CPU {cpu:.1f} s for {n} requests, {cpu / n * 1000:.2f} ms a request "
              f"(with the live loop running the submitted jobs)")
        for kind, vals in lat.items():
            print(f"  {kind:9s} n={len(vals):5d}  errors {errors[kind]:3d}  p50 {_p(vals, 50):7.1f} ms  "
                  f"p99 {_p(vals, 99):7.1f} ms  p99/baseline p99 {_p(vals, 99) / base99:5.1f}")
        api = lat["submit"] + lat["show"] + lat["list"]
        a99 = _p(api, 99)
        print(f"  API p99 {a99:.1f} ms vs baseline p99 {base99:.1f} ms: ratio {a99 / base99:.1f}; "
              f"target p99 < 50 ms: {'met' if a99 < 50 else 'NOT met'}")


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) of process ``pid`` so far (Linux ``/proc``): what the server
    spent, whatever else shares the machine."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _print_profile(path: Path, top: int = 25) -> None:
    import pstats

    stats = pstats.Stats(str(path))
    stats.sort_stats("tottime").print_stats(top)


if __name__ == "__main__":
    sys.exit(main())
