"""`accel exporter` on the command line: rules, loopback default, the non-loopback warning, port in use."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import threading

import pytest

from accel.cli import main
from accel.exporter import DEFAULT_LISTEN, DEFAULT_PORT, rules_yaml
from tests.exporter._procs import get, stop


def test_rules_prints_the_rule_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["exporter", "rules"]) == 0
    out = capsys.readouterr().out
    assert out == rules_yaml()
    assert "alert: \"AccelDeviceUnhealthy\"" in out
    assert "AccelMemoryLeakSuspected" in out and "accel_memory_leak_seconds_to_full" in out


def test_defaults_are_loopback_and_not_dcgm_exporters_port() -> None:
    assert DEFAULT_LISTEN == "127.0.0.1"
    assert DEFAULT_PORT not in (9400, 9100, 9090) and not 9100 <= DEFAULT_PORT <= 9999


def test_port_in_use_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        code = main(["exporter", "--sim", "dgx-h100", "--port", str(port)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1
    assert err == f"accel: error: port {port} on 127.0.0.1 is in use; pick another with --port\n"


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--min-interval", "-1"], "--min-interval"),
        (["--port", "70000"], "--port"),
        (["--sim", "no-such-profile"], "no-such-profile"),
    ],
)
def test_bad_usage_exits_2(argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    if needle != "no-such-profile":
        argv = ["--sim", "dgx-h100", *argv]
    assert main(["exporter", *argv]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.startswith("accel: error:")


def _stderr_lines(args: list[str], until: str) -> tuple[list[str], subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, "-m", "accel", "exporter", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    lines: list[str] = []

    def read() -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            lines.append(raw.decode())
            if until in lines[-1]:
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(60)
    return lines, proc


def test_serves_on_loopback_by_default() -> None:
    lines, proc = _stderr_lines(["--sim", "dgx-h100", "--port", "0"], "exporter on")
    try:
        assert len(lines) == 1, lines
        m = re.fullmatch(r"accel: exporter on http://127\.0\.0\.1:(\d+)/metrics \(backends: sim\)\n", lines[0])
        assert m, lines
        assert "accel_exporter_backend_up{backend=\"sim\"} 1.0" in get(f"http://127.0.0.1:{m.group(1)}/metrics")
    finally:
        stop(proc)


def test_non_loopback_only_when_asked_with_one_warning_line() -> None:
    lines, proc = _stderr_lines(["--sim", "dgx-h100", "--listen", "0.0.0.0", "--port", "0"], "exporter on")
    try:
        assert len(lines) == 2, lines
        assert lines[0].startswith("accel: warning: exporter listens on 0.0.0.0")
        assert "http://0.0.0.0:" in lines[1]
    finally:
        stop(proc)


def test_building_the_cli_parser_loads_neither_the_exporter_nor_prometheus_client() -> None:
    def loaded(argv: str) -> list[str]:
        code = (
            f"import sys, json; from accel.cli import build_parser; build_parser({argv}); "
            "print(json.dumps(sorted(m for m in sys.modules\n"
            "                        if m.startswith(('prometheus_client', 'accel.integrations.exporter.',\n"
            "                                         'accel.exporter')))))"
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
        result: list[str] = json.loads(out.stdout)
        return result

    assert loaded("['ls']") == []  # another command's parser does not build the exporter's
    assert loaded("['exporter']") == ["accel.integrations.exporter._args"]
    assert loaded("") == ["accel.integrations.exporter._args"]  # the full parser (the CLI reference)
