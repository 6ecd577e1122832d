"""Run the real ``accel`` console script in a subprocess, and interrupt it at chosen points."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

_SCRIPT = Path(sys.executable).parent / "accel"
#: The console script of this environment (what a user runs), else ``python -m accel``.
ACCEL: list[str] = [str(_SCRIPT)] if _SCRIPT.is_file() else [sys.executable, "-m", "accel"]

#: A line of ``PYTHONPROFILEIMPORTTIME`` output (the interpreter writes one per finished import).
_IMPORT_LINE = "import time:"
#: The first module ``accel.cli.main`` imports: its line means main was running.
_MAIN_IMPORT = "accel.cli._parser"


def accel_env(**extra: str) -> dict[str, str]:
    """This environment without the variables that select backends, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in ("ACCEL_SIM", "ACCEL_BACKENDS", "ACCEL_DEBUG")}
    env.update(extra)
    return env


def messages(stderr: str) -> list[str]:
    """The lines accel wrote on stderr (import-time profiling lines left out)."""
    return [line for line in stderr.splitlines() if line.strip() and not line.startswith(_IMPORT_LINE)]


def run_accel(*args: str, env: dict[str, str] | None = None, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ACCEL, *args], env=env or accel_env(), capture_output="stdout" not in kw, text=True, timeout=120, **kw
    )  # type: ignore[call-overload]


def _imported(line: str) -> str | None:
    if not line.startswith(_IMPORT_LINE):
        return None
    return line.rsplit("|", 1)[-1].strip()


@dataclass
class Interrupted:
    returncode: int
    stdout: str
    stderr: str
    #: whether ``main`` was running when the signal came (known for a trigger; for a timer, whether
    #: main got as far as importing its parser)
    reached_main: bool
    #: the import-profile line after which the signal was sent (``None``: sent on a timer)
    trigger: str | None


def interrupt(
    *args: str,
    after_import: str | None = None,
    after_stdout: str | None = None,
    delay: float = 0.0,
    second_after: float | None = None,
    env: dict[str, str] | None = None,
    wait_s: float = 20.0,
) -> Interrupted:
    """Start ``accel *args``, send SIGINT, and collect what it did.

    The signal goes ``delay`` seconds after a point: the import of module ``after_import``
    finished (seen in the interpreter's ``PYTHONPROFILEIMPORTTIME`` output, after the
    ``accel.cli`` import; ``"accel.cli"`` itself is the moment ``main`` starts), or
    ``after_stdout`` appeared on stdout, or (neither given) the start of the process.  If the
    point does not come within ``wait_s`` the signal is sent anyway.  ``second_after``: a
    second SIGINT that long after the first (an impatient user).
    """
    environ = dict(env or accel_env())
    environ["PYTHONPROFILEIMPORTTIME"] = "1"
    proc = subprocess.Popen([*ACCEL, *args], env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=foreground_signals)
    assert proc.stdout is not None and proc.stderr is not None
    out = bytearray()
    err = bytearray()
    reached = False
    trigger = None
    deadline = time.monotonic() + wait_s
    waiting = after_import is not None or after_stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ, out)
        sel.register(proc.stderr, selectors.EVENT_READ, err)
        while waiting and sel.get_map() and time.monotonic() < deadline:
            for key, _ in sel.select(max(deadline - time.monotonic(), 0.0)):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                key.data.extend(chunk)
            for line in err.decode(errors="replace").splitlines():
                name = _imported(line)
                if name == "accel.cli":
                    reached = True
                elif reached and after_import is not None and name == after_import:
                    trigger = line
            if after_import == "accel.cli" and reached:
                trigger = "accel.cli"
            if (trigger is not None) or (after_stdout is not None and after_stdout in out.decode(errors="replace")):
                break
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    if second_after is not None:
        time.sleep(second_after)
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
    try:
        rest_out, rest_err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        rest_out, rest_err = proc.communicate()
        raise AssertionError(f"accel {' '.join(args)} did not exit within 60 s of SIGINT") from None
    stderr = (bytes(err) + rest_err).decode(errors="replace")
    return Interrupted(
        returncode=proc.returncode,
        stdout=(bytes(out) + rest_out).decode(errors="replace"),
        stderr=stderr,
        # The interpreter writes an import's line when the import is over, also when it failed:
        # the accel.cli line does not prove main ran.  accel.cli._parser is imported by main only.
        reached_main=trigger is not None or any(_imported(line) == _MAIN_IMPORT for line in stderr.splitlines()),
        trigger=trigger,
    )


def foreground_signals() -> None:
    """In the child before exec: SIGINT at its default, as in a foreground process at a terminal.

    A test run started in the background by a shell without job control (``cmd &``) inherits
    SIGINT ignored, and an ignored signal stays ignored across exec: the child would then not see
    the Ctrl-C these tests send before accel installs its own handler.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)
