"""Live equals replay: Philly jobs submitted through the API to ``accel serve --sim`` against the
offline replay of the same engine on the same hosts.

The service runs as a real ``accel serve --sim dgx-h100,...`` process (one 8-device host per
node of the VC, as ``philly_vc_nodes.csv`` says) at ``--time-scale``; a driver submits each of
the first ``--jobs`` jobs of the VC's trace (``/work/shared/traces/philly``: devices, duration =
service / devices) through ``POST /v1/jobs`` at its trace time on the service's clock.  The
replay (the baseline, in the same run) is :class:`scheduler.queueing.Simulator` with the same
cluster (the sim executor's hosts), policy, prices and declared durations, its submit times the
trace's on the live time line.  It prints the share of jobs whose start is within the scale's
resolution (``--time-scale`` x the service's 0.2 s tick), the largest start error, and the two
bills.

    python benchmarks/service/live_vs_replay.py                  # 2,000 jobs of VC 0e4a51 (32 nodes)
    python benchmarks/service/live_vs_replay.py --quick          # 100 jobs of VC 103959 (8 nodes), ~30 s
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
TRACES = Path(os.environ.get("ACCEL_PHILLY_TRACES", "/work/shared/traces/philly"))
TICK_S = 0.2  # accel serve's live-loop tick (Service.start_loop's default)


def _nodes(vc: str) -> int:
    with (TRACES / "philly_vc_nodes.csv").open(newline="") as fh:
        for row in csv.DictReader(fh):
            if row["vc"] == vc:
                return int(row["node num"])
    raise SystemExit(f"VC {vc} is not in {TRACES / 'philly_vc_nodes.csv'}")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(state: Path, profiles: str, scale: float, port: int) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-c", "import sys; from accel.cli import main; sys.exit(main())", "serve",
            "--state", str(state), "--sim", profiles, "--time-scale", repr(scale),
            "--listen", f"127.0.0.1:{port}", "--rate", "100000", "--burst", "100000"]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _replay(jobs: list[Any], offset: float, profiles: str, prices: dict[str, float], tmp: Path
            ) -> tuple[dict[str, float], float, float]:
    """Starts per trace job id, the bill total and the last end, from the offline replay."""
    from accel.scheduler import ClusterState, host_spec_from_inventory
    from accel.scheduler.queueing import DeclaredEstimator, PriceTable, QueueingScheduler, Simulator, TraceJob
    from accel.service._core import default_policy
    from accel.service.executors import ExecutorContext, build_executor

    ex = build_executor("sim", ExecutorContext(lambda: 0.0, tmp / "replay-logs", {"profiles": profiles}))
    try:
        cluster = ClusterState.from_specs(host_spec_from_inventory(inv) for inv in ex.hosts())
    finally:
        ex.close()  # type: ignore[attr-defined]
    engine = QueueingScheduler(cluster, default_policy(30.0), prices=PriceTable(prices))
    shifted = [TraceJob(j.id, offset + j.submit_s, j.devices, j.duration_s, tenant=j.tenant) for j in jobs]
    Simulator(engine, shifted, DeclaredEstimator(), estimate_at_submit=False).run()
    starts = {j.id: engine.jobs[j.id].first_started_at for j in jobs}
    last = max((engine.jobs[j.id].ended_at or 0.0) for j in jobs)
    return {k: v for k, v in starts.items() if v is not None}, engine.bill(last).total(), last


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vc", default="0e4a51")
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--wall", type=float, default=150.0, help="wall seconds the submissions span (sets the scale)")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    if args.quick:
        args.vc, args.jobs, args.wall = "103959", 100, 10.0

    from accel.scheduler.queueing import load_philly

    jobs = load_philly(TRACES / f"trace_{args.vc}.csv", limit=args.jobs)
    first = jobs[0].submit_s
    rel = [j.submit_s - first for j in jobs]
    scale = max(1.0, rel[-1] / args.wall)
    resolution = scale * TICK_S
    profiles = ",".join(["dgx-h100"] * _nodes(args.vc))
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        port = _free_port()
        proc = _serve(tmp / "state", profiles, scale, port)
        url = f"http://127.0.0.1:{port}"
        try:
            end = time.monotonic() + 120
            while True:
                try:
                    if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > end or proc.poll() is not None:
                    err = proc.stderr.read().decode() if proc.stderr and proc.poll() is not None else ""
                    raise SystemExit(f"accel serve did not start: {err[-2000:]}")
                time.sleep(0.2)
            token = (tmp / "state" / "admin.token").read_text().strip()
            headers = {"Authorization": f"Bearer {token}"}
            live: dict[str, dict[str, Any]] = {}
            with httpx.Client(base_url=url, headers=headers, timeout=60) as client:
                prices = {p["pool"]: p["price_per_device_hour"] for p in client.get("/v1/pools").json()["pools"]}
                begin = time.monotonic() + 0.5

                def submit(i: int) -> None:
                    wait = begin + rel[i] / scale - time.monotonic()
                    if wait > 0:
                        time.sleep(wait)
                    j = jobs[i]
                    r = client.post("/v1/jobs", json={"name": f"philly-{i}", "command": ["train"], "devices": j.devices,
                                                      "duration_s": j.duration_s, "tenant": args.vc})
                    r.raise_for_status()
                    live[j.id] = r.json()

                t_sub = time.monotonic()
                for i in range(len(jobs)):  # one at a time: the service sees them in trace order
                    submit(i)
                late = time.monotonic() - begin - rel[-1] / scale
                seen = [live[j.id]["submitted_at"] for j in jobs]  # when the service took each submit
                offset = min(s - r for s, r in zip(seen, rel, strict=True))
                lateness = sorted(s - offset - r for s, r in zip(seen, rel, strict=True))
                starts, replay_bill, last_end = _replay(jobs, offset, profiles, prices, tmp)
                # the same replay with the submit times the service saw: the service's own fidelity,
                # without the driver's and the API's lateness
                as_seen = [dataclasses.replace(j, submit_s=s - offset + first) for j, s in zip(jobs, seen, strict=True)]
                starts_seen, bill_seen, last_seen = _replay(as_seen, offset, profiles, prices, tmp)
                last_end = max(last_end, last_seen)
                # wait until the live clock passes the replay's last end, then until every job is done
                while True:
                    recs = {jid: client.get(f"/v1/jobs/{rec['id']}").json() for jid, rec in live.items()}
                    now = max(r["now"] for r in recs.values())
                    done = all(r["state"] in ("finished", "failed", "cancelled") for r in recs.values())
                    if done and now >= last_end:
                        break
                    if now < last_end:
                        time.sleep(min(5.0, max(0.2, (last_end - now) / scale)))
                    else:
                        time.sleep(0.5)
                    if time.monotonic() - t_sub > 20 * args.wall + 600:
                        raise SystemExit("live run did not finish")
                live_bill = float(client.get("/v1/bill").json()["total"])
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
    print(f"VC {args.vc}: {len(jobs)} jobs on {_nodes(args.vc)} sim dgx-h100 hosts, time scale {scale:.0f} "
          f"(resolution {resolution:.0f} s = scale x {TICK_S} s tick)")
    print(f"  submits as the service took them, after their trace time: median {lateness[len(lateness) // 2]:.0f} s, "
          f"max {lateness[-1]:.0f} s ({lateness[-1] / scale:.2f} s wall); the driver ended {late:.2f} s wall late")
    for label, ref, bill in (("replay at the trace's submit times", starts, replay_bill),
                             ("replay at the submit times the service saw", starts_seen, bill_seen)):
        errors = []
        for j in jobs:
            placed = [e["t"] for e in recs[j.id]["timeline"] if e["actor"] == "scheduler" and e["kind"] == "placed"]
            errors.append(placed[0] - ref[j.id] if placed and j.id in ref else float("inf"))
        within = sum(1 for e in errors if abs(e) <= resolution) / len(errors)
        worst = max(abs(e) for e in errors)
        median = sorted(abs(e) for e in errors)[len(errors) // 2]
        diff = live_bill - bill
        print(f"  vs {label}: starts within the resolution {within:.1%}; largest start error {worst:.0f} s "
              f"({worst / resolution:.2f} x resolution), median {median:.1f} s; bill live {live_bill:.2f} vs "
              f"{bill:.2f} USD ({diff / bill:+.3%})" if bill else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
