"""``accel job`` and ``accel bill`` against a live service: tables, --json, the command after --."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accel.cli import main
from tests.service._svc import rig

pytest.importorskip("starlette")


def _accel(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_job_commands_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    with rig(tmp_path) as r:
        monkeypatch.setenv("ACCEL_SERVER", str(r.client.base_url))
        monkeypatch.setenv("ACCEL_TOKEN", r.alice)
        code, out, _ = _accel(capsys, "job", "quote", "--devices", "2", "--duration", "600")
        assert code == 0
        lines = out.splitlines()
        assert lines[0].split()[:3] == ["POOL", "WAIT", "P50"]
        assert any(ln.startswith("NVIDIA H100 80GB HBM3") and "1.33 USD" in ln for ln in lines)
        code, out, _ = _accel(capsys, "job", "submit", "--devices", "2", "--model", "H100", "--duration", "600",
                              "--name", "eval", "--env", "PYTHONUNBUFFERED=1", "--",
                              "python", "train.py", "--epochs", "3")
        assert code == 0, out
        job_id = out.split()[0]
        assert f"page: {r.client.base_url}/jobs/{job_id}" in out
        r.run_for(12)
        code, out, _ = _accel(capsys, "job", "show", job_id, "--json")
        rec = json.loads(out)
        assert rec["command"] == ["python", "train.py", "--epochs", "3"]  # --epochs is the job's, not accel's
        assert rec["state"] == "finished" and rec["env_names"] == ["PYTHONUNBUFFERED"]
        code, out, _ = _accel(capsys, "job", "show", job_id)
        assert "exit: code 0, completed" in out and "bill: 1.3333 USD" in out
        code, out, _ = _accel(capsys, "job", "ls")
        assert out.splitlines()[1].split()[:4] == [job_id, "eval", "team-a", "finished"]
        code, out, _ = _accel(capsys, "job", "logs", job_id, "--tail", "1")
        assert "exited with code 0" in out and out.count("\n") == 1
        code, out, _ = _accel(capsys, "bill", "--json")
        assert json.loads(out)["total"] == pytest.approx(2 * 600 / 3600 * 4.0)
        code, out, _ = _accel(capsys, "bill")
        assert out.splitlines()[-1].split() == ["total", "1.3333", "USD"]
        # another tenant's token: the job does not exist
        code, out, err = _accel(capsys, "job", "show", job_id, "--token", r.bob)
        assert code == 1 and f"no job {job_id}" in err and "HTTP 404" in err
        code, out, err = _accel(capsys, "job", "cancel", job_id)
        assert code == 1 and "already finished" in err


def test_client_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ACCEL_TOKEN", raising=False)
    monkeypatch.delenv("ACCEL_TOKEN_FILE", raising=False)
    code, _, err = _accel(capsys, "job", "ls", "--server", "http://127.0.0.1:9")
    assert code == 2 and "no token" in err
    code, _, err = _accel(capsys, "job", "ls", "--server", "http://127.0.0.1:9", "--token", "x")
    assert code == 1 and "cannot reach accel serve at http://127.0.0.1:9" in err and "Traceback" not in err
    code, _, err = _accel(capsys, "job", "submit", "--server", "http://127.0.0.1:9", "--token", "x")
    assert code == 2 and "give the command after --" in err
    code, _, err = _accel(capsys, "job", "ls", "--token-file", str(tmp_path / "none"))
    assert code == 2 and "--token-file" in err


def test_token_create_prints_the_token_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with rig(tmp_path) as r:
        code, out, err = _accel(capsys, "serve", "token", "create", "--state", str(r.state), "--tenant", "team-c")
        assert code == 0 and err == ""
        token = out.strip()
        assert out == token + "\n" and token.startswith("accel_")
        who = r.client.get("/v1/jobs", headers=r.headers(token))
        assert who.status_code == 200
        code, out, err = _accel(capsys, "serve", "token", "create", "--state", str(r.state), "--tenant", "Bad Name")
        assert code == 2 and "tenant 'Bad Name'" in err
    code, out, err = _accel(capsys, "serve", "token", "create", "--state", str(tmp_path / "nope"), "--tenant", "x")
    assert code == 2 and "not the state directory" in err


def test_sched_price_file_errors(tmp_path: Path) -> None:
    from accel.errors import ConfigError
    from accel.scheduler.queueing.cli import load_prices

    cases = {"[]": "expected an object", '{"per_device_hour": {"H100": -1}}': "prices >= 0",
             '{"per_device_hour": {"H100": "4"}}': "prices >= 0", '{"currency": ""}': "currency",
             "{": "not JSON", '{"other": 1}': "expected an object"}
    for text, message in cases.items():
        path = tmp_path / "p.json"
        path.write_text(text)
        with pytest.raises(ConfigError, match=message):
            load_prices(path)
    with pytest.raises(ConfigError, match="No such file"):
        load_prices(tmp_path / "missing.json")
    path.write_text('{"currency": "EUR", "per_device_hour": {"H100": 3}}')
    table = load_prices(path)
    assert table.device_hour("H100") == 3.0 and table.currency == "EUR"


def test_serve_refuses_bad_options_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = str(tmp_path / "s")
    for argv, message in (
        (["serve", "--state", state], "name the hosts to run on"),
        (["serve", "--state", state, "--sim", "dgx-h100", "--listen", "nowhere"], "expected HOST:PORT"),
        (["serve", "--state", state, "--executor", "nosuch"], "unknown executor 'nosuch'"),
        (["serve", "--state", state, "--sim", "dgx-h100", "--price", "H100=-1"], "MODEL=PRICE"),
        (["serve", "--state", state, "--sim", "dgx-h100", "--executor-option", "novalue"], "NAME=VALUE"),
        (["serve", "--state", state, "--sim", "no-such-profile"], "no-such-profile"),
    ):
        code, _, err = _accel(capsys, *argv)
        assert code == 2 and message in err and "Traceback" not in err, (argv, err)
