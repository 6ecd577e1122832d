"""Load on accel's HTTP services: ``accel k8s extender`` and ``accel exporter``, over loopback.

    python benchmarks/service_load/run.py             # 5,000 requests per phase, 20 clients
    python benchmarks/service_load/run.py --quick     # CI smoke: 500 requests per phase

Each service runs as its own process, started by its CLI command exactly as a user starts it
(``accel k8s extender --inventories F --port 0``; ``accel exporter --sim dgx-h100 --port 0``), so
this script measures whichever accel is importable: run it on main's code and on a branch and the
two outputs compare.  The baseline, measured in the same run on the same work, is the standard
library's ``ThreadingHTTPServer`` (``_stdlib_server.py``: a thread per connection, as the
extender served before issue 32 and as prometheus_client's ``start_http_server`` serves): for
the extender the old handler around the same ``Extender.handle_bytes``; for the exporter the
page the shipped exporter served, as fixed bytes (the baseline does no collection, so it is the
transport's cost alone).

Phases, each against the shipped server and the baseline:

* ``load``: ``--clients`` threads, each with one keep-alive connection, send ``--requests``
  valid requests in all (``/filter`` and ``/prioritize`` alternating, a pod asking for 1..8
  devices over ``--nodes`` node names; or ``GET /metrics``);
* ``load+idle``: the same, while ``--idle`` half-open sockets (a request line, never the rest)
  stay open; the server process's thread count is sampled during the phase.

Printed per phase and server: requests answered, mean, p50 and p99 latency (ms), requests per second,
connection resets (a reset or a closed connection under a client; the client reconnects and
sends again), and the server's most threads; then shipped / baseline ratios.  Under a closed
loop of clients the mean is clients / throughput whatever the server; p50 alone flatters an
unfair server (threads under the GIL serve some requests at once and make others wait).
Each phase alternates the two servers ``--rounds`` times (shipped first in even rounds, the
baseline first in odd ones), so a change in the machine's background load falls on both.
Every phase stops by itself after ``--max-seconds``.  Loopback only.

To compare with another version of accel, run from that version's checkout so that
``python -m accel`` imports it (``-m`` puts the working directory first on ``sys.path``)::

    git archive main | tar -x -C /tmp/accel-main
    cd /tmp/accel-main && PYTHONPATH=/tmp/accel-main python /path/to/benchmarks/service_load/run.py
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ACCEL = [sys.executable, "-m", "accel"]


@dataclass
class Result:
    latencies: list[float] = field(default_factory=list)
    resets: int = 0
    failures: int = 0  # answers other than 200
    wall_s: float = 0.0
    threads: int = 0


def _threads(pid: int) -> int:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    m = re.search(r"^Threads:\s+(\d+)", text, re.M)
    return int(m.group(1)) if m else 0


class Server:
    """A server process; ``port`` is read from its first lines (the CLI's banner, or ``port N``)."""

    def __init__(self, argv: list[str], pattern: str) -> None:
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert self.proc.stdout is not None
        lines = []
        deadline = time.monotonic() + 120
        for line in self.proc.stdout:
            lines.append(line)
            m = re.search(pattern, line)
            if m:
                self.port = int(m.group(1))
                break
            if time.monotonic() > deadline:
                break
        else:
            raise SystemExit(f"server did not start: {' '.join(argv)}\n{''.join(lines)}")
        # keep draining its output so that it never blocks on a full pipe
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


def _extender_bodies(nodes: list[str], n: int, seed: int) -> list[tuple[str, bytes]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        req = {"devices": rng.choice([1, 1, 2, 4, 8])}
        pod = {"metadata": {"name": f"p{i}", "namespace": "bench", "uid": f"uid-{i}",
                            "annotations": {"accel.dev/request": json.dumps(req)}},
               "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}
        verb = "filter" if i % 2 == 0 else "prioritize"
        out.append((verb, json.dumps({"Pod": pod, "NodeNames": nodes}).encode()))
    return out


def _client(port: int, work: list[tuple[str, str, bytes]], next_index: Any, result: Result, lock: threading.Lock,
            stop_at: float) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    mine: list[float] = []
    resets = failures = 0
    while time.monotonic() < stop_at:
        i = next_index()
        if i is None:
            break
        method, path, body = work[i]
        for _attempt in range(5):
            began = time.perf_counter()
            try:
                conn.request(method, path, body=body or None,
                             headers={"Content-Type": "application/json"} if body else {})
                resp = conn.getresponse()
                resp.read()
            except (ConnectionError, http.client.HTTPException, TimeoutError, OSError):
                resets += 1
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                continue
            mine.append(time.perf_counter() - began)
            if resp.status != 200:
                failures += 1
            break
    conn.close()
    with lock:
        result.latencies.extend(mine)
        result.resets += resets
        result.failures += failures


def _idle_sockets(port: int, n: int) -> list[socket.socket]:
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(b"POST /filter HTTP/1.1\r\nHost: bench\r\n")
        socks.append(s)
    return socks


def run_phase(server: Server, work: list[tuple[str, str, bytes]], clients: int, idle: int,
              max_seconds: float, result: Result | None = None) -> Result:
    """Send ``work`` with ``clients`` threads (adding to ``result`` when given)."""
    result = result if result is not None else Result()
    lock = threading.Lock()
    counter = iter(range(len(work)))
    count_lock = threading.Lock()

    def next_index() -> int | None:
        with count_lock:
            return next(counter, None)

    socks = _idle_sockets(server.port, idle) if idle else []
    try:
        time.sleep(0.2 if idle else 0)
        result.threads = max(result.threads, _threads(server.proc.pid))
        stop_at = time.monotonic() + max_seconds
        threads = [threading.Thread(target=_client, args=(server.port, work, next_index, result, lock, stop_at))
                   for _ in range(clients)]
        began = time.perf_counter()
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):
            result.threads = max(result.threads, _threads(server.proc.pid))
            for t in threads:
                t.join(0.05)
        result.wall_s += time.perf_counter() - began
    finally:
        for s in socks:
            s.close()
    return result


def _ms(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def report(name: str, res: Result) -> dict[str, Any]:
    mean = 1000 * sum(res.latencies) / len(res.latencies) if res.latencies else float("nan")
    row = {"server": name, "answered": len(res.latencies), "mean_ms": mean, "p50_ms": _ms(res.latencies, 0.50),
           "p99_ms": _ms(res.latencies, 0.99), "req_per_s": len(res.latencies) / res.wall_s if res.wall_s else 0.0,
           "resets": res.resets, "non_200": res.failures, "server_threads": res.threads}
    print(f"  {name:16s} {row['answered']:5d} answered  mean {mean:6.1f} ms  p50 {row['p50_ms']:6.1f} ms  "
          f"p99 {row['p99_ms']:7.1f} ms  "
          f"{row['req_per_s']:7.0f} req/s  resets {row['resets']:4d}  non-200 {row['non_200']:3d}  "
          f"server threads {row['server_threads']}", flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=5000)
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--idle", type=int, default=300, help="half-open sockets held during the load+idle phase")
    ap.add_argument("--nodes", type=int, default=200, help="hosts of the extender's simulated cluster")
    ap.add_argument("--max-seconds", type=float, default=120.0, help="a phase stops after this long")
    ap.add_argument("--rounds", type=int, default=5,
                    help="each phase alternates shipped and baseline this many times (background load hits both)")
    ap.add_argument("--quick", action="store_true", help="500 requests per phase, 50 nodes")
    ap.add_argument("--only", choices=["extender", "exporter"])
    ap.add_argument("--json", action="store_true", help="print the rows as JSON at the end")
    args = ap.parse_args(argv)
    if args.quick:
        args.requests, args.nodes, args.max_seconds = 500, 50, min(args.max_seconds, 30.0)
    if (not 1 <= args.clients <= 200 or not 1 <= args.requests <= 100_000 or not 0 <= args.idle <= 2000
            or not 1 <= args.rounds <= 100 or not args.max_seconds > 0):
        ap.error("--clients 1..200, --requests 1..100000, --idle 0..2000, --rounds 1..100, --max-seconds > 0")

    import accel
    from accel.sim import generate_cluster

    print(f"service load: accel from {Path(accel.__file__).parent}; {args.clients} clients, {args.requests} "
          f"requests per phase, {args.idle} idle sockets in load+idle; CPUs {os.cpu_count()}", flush=True)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="accel-load-") as tmp:
        inv_path = Path(tmp) / "inventories.json"
        cluster = generate_cluster(args.nodes, {"dgx-h100": 1.0, "mi300x-8": 1.0, "rtx4090-4": 1.0}, seed=5)
        inv_path.write_text("[" + ",".join(inv.model_dump_json() for inv in cluster) + "]")
        names = [inv.host.hostname for inv in cluster]
        plans: list[tuple[str, list[str], list[str], list[tuple[str, str, bytes]]]] = []
        if args.only in (None, "extender"):
            work = [("POST", f"/{verb}", body) for verb, body in _extender_bodies(names, args.requests, seed=9)]
            plans.append(("extender",
                          [*ACCEL, "k8s", "extender", "--inventories", str(inv_path), "--port", "0"],
                          [sys.executable, str(HERE / "_stdlib_server.py"), "extender", str(inv_path)], work))
        if args.only in (None, "exporter"):
            page = Path(tmp) / "metrics.txt"
            plans.append(("exporter", [*ACCEL, "exporter", "--sim", "dgx-h100", "--port", "0"],
                          [sys.executable, str(HERE / "_stdlib_server.py"), "static", str(page)],
                          [("GET", "/metrics", b"")] * args.requests))
        for service, shipped_argv, base_argv, work in plans:
            shipped = Server(shipped_argv, r"http://127\.0\.0\.1:(\d+)/")
            try:
                if service == "exporter":  # the baseline serves the page the shipped exporter serves
                    conn = http.client.HTTPConnection("127.0.0.1", shipped.port, timeout=30)
                    conn.request("GET", "/metrics")
                    Path(base_argv[-1]).write_bytes(conn.getresponse().read())
                    conn.close()
                baseline = Server(base_argv, r"^port (\d+)")
                try:
                    for phase, idle in (("load", 0), ("load+idle", args.idle)):
                        print(f"{service} / {phase}:", flush=True)
                        results = {"shipped": Result(), "stdlib baseline": Result()}
                        servers = [("shipped", shipped), ("stdlib baseline", baseline)]
                        per_round = -(-len(work) // args.rounds)
                        for r in range(args.rounds):
                            chunk = work[r * per_round:(r + 1) * per_round]
                            for name, srv in servers if r % 2 == 0 else servers[::-1]:
                                run_phase(srv, chunk, args.clients, idle, args.max_seconds / args.rounds,
                                          results[name])
                        got = {}
                        for name, res in results.items():
                            got[name] = row = report(name, res)
                            rows.append({"service": service, "phase": phase, **row})
                        a, b = got["shipped"], got["stdlib baseline"]
                        print(f"  ratio shipped / baseline: mean {a['mean_ms'] / b['mean_ms']:.2f}  "
                              f"p50 {a['p50_ms'] / b['p50_ms']:.2f}  p99 {a['p99_ms'] / b['p99_ms']:.2f}  "
                              f"req/s {a['req_per_s'] / b['req_per_s']:.2f}", flush=True)
                finally:
                    baseline.stop()
            finally:
                shipped.stop()
    if args.json:
        print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
