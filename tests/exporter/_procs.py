"""Start and stop the exporter and Prometheus as child processes (stopped by pid: terminate, wait, kill)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from tests._helpers import stop

T = TypeVar("T")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def get(url: str, timeout: float = 5.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        body: bytes = resp.read()
        return body.decode()


def wait_for(what: str, probe: Callable[[], T | None], limit_s: float, proc: subprocess.Popen[bytes]) -> T:
    """Call ``probe`` until it returns something; fail with the child's output when it exits or time runs out."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            out = proc.stdout.read().decode() if proc.stdout else ""
            raise AssertionError(f"{what}: the process exited ({proc.returncode}):\n{out[-3000:]}")
        try:
            got = probe()
        except (OSError, urllib.error.URLError, ValueError):
            got = None
        if got is not None:
            return got
        time.sleep(0.2)
    raise AssertionError(f"{what}: not seen within {limit_s:g} s")




@contextmanager
def exporter(args: Sequence[str], port: int) -> Iterator[subprocess.Popen[bytes]]:
    cmd = [sys.executable, "-m", "accel", "exporter", "--port", str(port), *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        wait_for("exporter /metrics", lambda: get(f"http://127.0.0.1:{port}/metrics") or None, 30, proc)
        yield proc
    finally:
        stop(proc)


@contextmanager
def prometheus(
    binary: str, workdir: Path, target_port: int, rules: Path
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = free_port()
    config = workdir / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
        f"rule_files:\n  - {json.dumps(str(rules))}\n"
        "scrape_configs:\n  - job_name: accel\n    static_configs:\n"
        f"      - targets: [\"127.0.0.1:{target_port}\"]\n"
    )
    cmd = [binary, f"--config.file={config}", f"--storage.tsdb.path={workdir / 'data'}",
           f"--web.listen-address=127.0.0.1:{port}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for("prometheus ready", lambda: get(f"{base}/-/ready") or None, 60, proc)
        yield base, proc
    finally:
        stop(proc)


def query(base: str, promql: str) -> list[dict[str, Any]]:
    doc = json.loads(get(f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": promql})))
    assert doc["status"] == "success", doc
    result: list[dict[str, Any]] = doc["data"]["result"]
    return result


def alerts(base: str) -> list[dict[str, Any]]:
    doc = json.loads(get(f"{base}/api/v1/alerts"))
    assert doc["status"] == "success", doc
    found: list[dict[str, Any]] = doc["data"]["alerts"]
    return found
