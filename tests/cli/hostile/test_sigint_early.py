"""SIGINT in the first milliseconds of ``accel``: exit 130, no traceback (issue 32).

``import accel`` now runs :mod:`accel._early` first, which sets SIGINT to a silent exit 130 when
the process is the ``accel`` command; before, a signal while ``accel/__init__.py`` (``logging``,
``accel.errors``) or ``accel.cli`` loaded reached Python's default handler and printed a
traceback from the import machinery.  The signal goes right after chosen imports finished (the
interpreter's ``PYTHONPROFILEIMPORTTIME`` lines), so each case is a known moment, not a race.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time

import pytest

from accel.cli import EXIT_INTERRUPTED
from tests.cli.hostile._proc import ACCEL, accel_env, foreground_signals, messages

ARGS = ("watch", "--sim", "dgx-h100", "--interval", "0.05")


def _interrupt_after(command: list[str], module: str, delay: float) -> tuple[int, str]:
    """Start ``command``, send SIGINT ``delay`` s after the import of ``module`` finished."""
    env = accel_env(PYTHONPROFILEIMPORTTIME="1")
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            preexec_fn=foreground_signals)
    assert proc.stderr is not None
    err = bytearray()
    seen = False
    deadline = time.monotonic() + 30
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stderr, selectors.EVENT_READ)
        while not seen and time.monotonic() < deadline:
            if not sel.select(max(deadline - time.monotonic(), 0.0)):
                continue
            chunk = os.read(proc.stderr.fileno(), 65536)
            if not chunk:
                break
            err.extend(chunk)
            seen = any(line.startswith("import time:") and line.rsplit("|", 1)[-1].strip() == module
                       for line in err.decode(errors="replace").splitlines())
    assert seen, f"{module} was never imported: {err.decode(errors='replace')[-2000:]}"
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    _, rest = proc.communicate(timeout=60)
    return proc.returncode, (bytes(err) + rest).decode(errors="replace")


@pytest.mark.parametrize(
    "module",
    [
        "accel._early",  # the first thing `import accel` runs
        "accel.errors",  # accel/__init__.py is loading
        "accel",  # `import accel` is over, accel.cli is next
    ],
)
@pytest.mark.parametrize("delay", [0.0, 0.005])
def test_sigint_while_accel_imports_is_a_clean_130(module: str, delay: float) -> None:
    code, stderr = _interrupt_after([*ACCEL, *ARGS], module, delay)
    assert code == EXIT_INTERRUPTED, stderr[-3000:]
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr[-3000:]
    assert messages(stderr) == []


def test_python_dash_m_accel_is_guarded_as_early() -> None:
    code, stderr = _interrupt_after([sys.executable, "-m", "accel", *ARGS], "accel.errors", 0.0)
    assert code == EXIT_INTERRUPTED and "Traceback" not in stderr, stderr[-3000:]


def test_importing_accel_elsewhere_leaves_sigint_alone() -> None:
    probe = "import signal, accel; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
    out = subprocess.run([sys.executable, "-c", probe], env=accel_env(), capture_output=True, text=True,
                         timeout=60, preexec_fn=foreground_signals)
    assert out.stdout.strip() == "True", out.stderr
