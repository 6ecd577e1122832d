"""``accel serve --prometheus``'s reader against Debian's real Prometheus scraping a real
``accel exporter --sim dgx-h100`` (tests/exporter's fixtures start and stop both by pid)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from accel.service._app import build_app
from accel.service._auth import TokenBook, ensure_admin_token
from accel.service._prometheus import MetricsSourceError, PrometheusSource
from tests.exporter._procs import exporter, free_port, prometheus, query, wait_for
from tests.service._svc import open_service, serving

PROMETHEUS = shutil.which("prometheus")
pytestmark = pytest.mark.skipif(
    PROMETHEUS is None, reason="prometheus is not installed (apt-get install prometheus; .ci/run installs it)"
)
HOST = "dgx-h100-sim"
#: dgx-h100's devices at positions 0 and 1 (the simulator's ids are stable).
DEV0 = "nvidia:GPU-7b1e0c00-1d2a-4c3b-9e4f-000000000000"
DEV1 = "nvidia:GPU-7b1e0c01-1d2a-4c3b-9e4f-000000000001"


def test_a_jobs_device_readings_come_from_prometheus(tmp_path: Path) -> None:
    assert PROMETHEUS is not None
    rules = tmp_path / "rules.yml"
    rules.write_text("groups: []\n")
    port = free_port()
    with exporter(["--sim", "dgx-h100"], port), prometheus(PROMETHEUS, tmp_path, port, rules) as (base, prom):
        start = time.time()

        def three_scrapes() -> bool | None:
            got = query(base, f'count_over_time(accel_power_watts{{device="{DEV0}"}}[1m])')
            return True if got and float(got[0]["value"][1]) >= 3 else None

        wait_for("three scrapes of the exporter", three_scrapes, 60, prom)
        end = time.time()
        source = PrometheusSource(base + "/")
        rows = source.job_samples([(HOST, DEV0), (HOST, DEV1)], start - 5, end)
        assert {dev for _t, dev, *_ in rows} == {DEV0, DEV1}
        assert len(rows) >= 4 and [r[0] for r in rows] == sorted(r[0] for r in rows)
        for _t, _dev, mem, util, power in rows:
            assert mem is not None and mem > 0
            assert util is not None and 0.0 <= util <= 1.0
            assert power is not None and power > 0
        # The same values Prometheus answers an instant query with, at the same time.
        t, dev, mem, _util, power = rows[-1]
        at = query(base, f'accel_memory_used_bytes{{device="{dev}"}} @ {t}')
        assert int(float(at[0]["value"][1])) == mem
        at = query(base, f'accel_power_watts{{device="{dev}"}} @ {t}')
        assert float(at[0]["value"][1]) == power
        # Other devices of the host are not the job's.
        assert source.job_samples([(HOST, "nvidia:GPU-not-there")], start, end) == []
        # Prometheus's own refusal, and an answer over the size bound, are errors named as such.
        with pytest.raises(MetricsSourceError, match=r"HTTP 400, bad_data: .*parse error"):
            source._range("accel_power_watts{", start, end, 1.0)
        with pytest.raises(MetricsSourceError, match="larger than 200 bytes"):
            PrometheusSource(base, max_bytes=200).job_samples([(HOST, DEV0)], start, end)
        _job_page_charts_from_prometheus(tmp_path, base, prom)


def _job_page_charts_from_prometheus(tmp_path: Path, base: str, prom: subprocess.Popen[bytes]) -> None:
    # accel serve over the same simulator profile (the same device ids) on the real wall clock:
    # a job runs 3 s on two devices, and its page draws Prometheus's readings of them; with a
    # Prometheus that cannot be reached, the page says so instead of drawing nothing.
    svc = open_service(tmp_path / "state", time.time, profiles="dgx-h100", scale=60.0)  # type: ignore[arg-type]
    try:
        tokens = TokenBook(svc.store)
        path = ensure_admin_token(tmp_path / "state", tokens, svc.store)
        assert path is not None
        auth = {"Authorization": f"Bearer {path.read_text().strip()}"}
        good = build_app(svc, tokens, metrics=PrometheusSource(base))
        bad = build_app(svc, tokens, metrics=PrometheusSource(f"http://127.0.0.1:{free_port()}", timeout_s=1))
        svc.start_loop(0.1)
        with serving(good) as url, serving(bad) as bad_url:
            body = {"name": "p", "command": ["train"], "devices": 2, "duration_s": 180}
            job = httpx.post(f"{url}/v1/jobs", json=body, headers=auth, timeout=30).json()["id"]

            def ended() -> bool | None:
                r = httpx.get(f"{url}/v1/jobs/{job}", headers=auth, timeout=30).json()
                return True if r["state"] == "finished" else None

            wait_for("the job ended", ended, 60, prom)
            page = httpx.get(f"{url}/jobs/{job}", headers=auth, timeout=30).text
            assert f"from Prometheus at {base}" in page
            assert 'aria-label="memory used"' in page and 'aria-label="power"' in page
            assert page.count("<polyline") == 3 * 2  # three charts, a line per device
            assert "metrics-error" not in page
            page = httpx.get(f"{bad_url}/jobs/{job}", headers=auth, timeout=30).text
            assert 'id="metrics-error"' in page and "could not be read" in page and "ConnectError" in page
            assert "<polyline" not in page and "no readings" not in page
    finally:
        svc.close()


def test_an_unreachable_or_silent_prometheus_is_an_error_not_an_empty_chart() -> None:
    closed = free_port()
    with pytest.raises(MetricsSourceError, match=rf"127\.0\.0\.1:{closed}: query_range .*ConnectError"):
        PrometheusSource(f"http://127.0.0.1:{closed}").job_samples([("h", DEV0)], 0.0, 60.0)
    with socket.socket() as silent:  # accepts connections (the backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        with pytest.raises(MetricsSourceError, match=r"no answer within 0\.3 s"):
            PrometheusSource(url, timeout_s=0.3).job_samples([("h", DEV0)], 0.0, 60.0)


def test_a_hostile_prometheus_answer_is_an_error_not_a_crash() -> None:
    # 100,000 nested arrays: json.loads would raise RecursionError; the shared bounded reader refuses it
    import http.server
    import threading

    class Deep(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"[" * 100_000
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Deep)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        with pytest.raises(MetricsSourceError, match="not a JSON answer of the Prometheus API"):
            PrometheusSource(url, timeout_s=5.0).job_samples([("h", DEV0)], 0.0, 60.0)
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("url", ["ftp://h:9090", "http://", "http://u:p@h:9090", "http://h:9090/?q=1"])
def test_a_bad_prometheus_url_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match="--prometheus"):
        PrometheusSource(url)
