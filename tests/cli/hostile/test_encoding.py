"""Output to a stdout that cannot carry every character, and to a closed stdout (issue 32).

A device model, a hostname or a tool's message may hold any character; a stdout in ASCII
(``PYTHONIOENCODING=ascii``, ``LC_ALL=C`` without UTF-8 mode) or Latin-1 must still get the
whole output: what it cannot encode is written as a JSON escape (``\\u2014``), so ``--json``
stays valid JSON and the text stays readable.  Run as a user does: the console script in a
subprocess, with the encoding set in its environment.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.cli.hostile._proc import ACCEL, accel_env, messages

ROOT = Path(__file__).resolve().parents[3]
MODEL = "NVIDIA H100 \u2014 \u03a9 \u00e9 \U0001f600"  # dash, Greek, Latin-1, beyond the BMP
HOST = "h\u00f4te-\u00e9"

ENCODINGS = {
    "ascii": {"PYTHONIOENCODING": "ascii"},
    "latin-1": {"PYTHONIOENCODING": "latin-1"},
    "C locale": {"PYTHONUTF8": "0", "LC_ALL": "C", "PYTHONIOENCODING": ""},
}


@pytest.fixture(scope="module")
def profile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    doc = json.loads((ROOT / "accel" / "sim" / "profiles" / "dgx-h100.json").read_text(encoding="utf-8"))
    doc["host"]["hostname"] = HOST
    for template in doc["templates"].values():
        template["model"] = MODEL
    path = tmp_path_factory.mktemp("unicode") / "unicode.json"
    path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    return path


def _env(name: str) -> dict[str, str]:
    env = accel_env(**ENCODINGS[name])
    if not env.get("PYTHONIOENCODING"):
        env.pop("PYTHONIOENCODING")
    return env


def _decode(raw: bytes, name: str) -> str:
    return raw.decode("latin-1" if name == "latin-1" else "ascii")  # strict: any other byte fails


@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
@pytest.mark.parametrize("command", [["ls"], ["ls", "--json"], ["show", "0"], ["show", "0", "--json"]])
def test_output_degrades_to_escapes_on_a_narrow_stdout(profile: Path, encoding: str, command: list[str]) -> None:
    proc = subprocess.run(
        [*ACCEL, *command, "--sim", str(profile)],
        env=_env(encoding), capture_output=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    assert proc.stderr == b""
    out = _decode(proc.stdout, encoding)
    if "--json" in command:
        doc = json.loads(out)  # still valid JSON, and the escapes decode to the very characters
        model = doc["model"] if command[0] == "show" else doc["devices"][0]["model"]
        assert model == MODEL
        if command[0] == "ls":
            assert doc["host"]["hostname"] == HOST
    else:
        assert "\\u2014" in out and "\\ud83d\\ude00" in out
        assert ("\u00e9" in out) == (encoding == "latin-1")  # what the stream can carry is kept


def test_watch_to_a_closed_stdout_says_the_stream_is_closed() -> None:
    proc = subprocess.run([*ACCEL, "watch", "--sim", "dgx-h100", "--count", "3", "--interval", "0"],
                          env=accel_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          timeout=120, preexec_fn=_close_stdout)
    assert proc.returncode == 1, proc.stderr
    assert messages(proc.stderr) == ["accel: error: cannot write the output to stdout: the stream is closed"]


def _close_stdout() -> None:
    import os

    os.close(1)  # `accel watch >&-`
