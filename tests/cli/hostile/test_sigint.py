"""SIGINT at any moment of ``accel``: exit 130, no traceback (issue 14, item 5).

The signal goes to the real console script in a subprocess, at points taken from the
interpreter's own import profile (``PYTHONPROFILEIMPORTTIME``): the moment ``main`` starts,
while the parser is being built, while the command modules (pydantic, the model, discovery)
load, while backends open; and on timers after those, during a ``watch``, during a hung vendor
tool, and twice in a row.  ``watch`` never ends by itself, so every signal lands while accel
runs.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from accel.cli import EXIT_INTERRUPTED
from tests.cli.hostile._proc import ACCEL, Interrupted, accel_env, foreground_signals, interrupt, messages

WATCH = ("watch", "--sim", "dgx-h100", "--interval", "0.05")


def _clean_130(res: Interrupted) -> None:
    assert res.returncode == EXIT_INTERRUPTED, (res.returncode, res.trigger, res.stderr[-3000:])
    assert "Traceback" not in res.stderr and "KeyboardInterrupt" not in res.stderr, res.stderr[-3000:]
    assert messages(res.stderr) == [], messages(res.stderr)


@pytest.mark.parametrize(
    "module",
    [
        "accel.cli",  # main is starting: nothing of the command is loaded yet
        "argparse",  # the parser is being built
        "accel.cli._parser",
        "pydantic_core",  # the command modules are loading (the model)
        "accel.model",
        "accel.discovery",
        "accel.cli._commands",  # the command starts: discovery, stevedore, backends opening
        "stevedore",
    ],
)
def test_sigint_while_loading_exits_130(module: str) -> None:
    res = interrupt(*WATCH, after_import=module)
    assert res.reached_main
    _clean_130(res)


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.1, 0.2, 0.3])
def test_sigint_shortly_after_main_starts_exits_130(delay: float) -> None:
    _clean_130(interrupt(*WATCH, after_import="accel.cli", delay=delay))


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.1, 0.2, 0.3, 0.5])
def test_sigint_after_process_start(delay: float) -> None:
    """Timed from the start of the process, as a user would press Ctrl-C.

    Once accel's code runs (the ``accel.cli`` import finished) the answer is a clean 130.  A
    signal earlier than that reaches the interpreter's own start-up (``site``, the ``.pth``
    files of the environment, ``import accel``): it kills the process before accel can answer
    (documented in ``accel.cli``); the assertion is then only that it did not survive it.
    """
    res = interrupt(*WATCH, delay=delay)
    if res.reached_main:
        _clean_130(res)
    else:
        assert res.returncode in (-signal.SIGINT, 1, EXIT_INTERRUPTED), res.stderr[-2000:]
        assert res.stdout == ""


def test_sigint_during_watch_exits_130_and_keeps_the_output() -> None:
    res = interrupt(*WATCH, after_stdout="refresh 2", delay=0.1)
    _clean_130(res)
    assert "accel watch  refresh 2" in res.stdout  # what was printed before the signal is not lost


def test_sigint_during_watch_json() -> None:
    res = interrupt("watch", "--sim", "dgx-h100", "--interval", "0", "--json", after_stdout="\n", delay=0.2)
    _clean_130(res)
    assert res.stdout.startswith("{\"samples\": [")  # one object a refresh (issue 32)


def test_a_second_sigint_is_still_a_clean_130() -> None:
    _clean_130(interrupt(*WATCH, after_import="accel.cli._commands", second_after=0.01))
    _clean_130(interrupt(*WATCH, after_stdout="refresh 1", second_after=0.0))


def test_sigint_during_a_hung_vendor_tool_kills_the_tool(tmp_path: Path) -> None:
    """A real tool process that hangs: SIGINT answers at once, and the tool does not outlive accel."""
    pidfile = tmp_path / "tool.pid"
    tool = tmp_path / "npu-smi"
    tool.write_text(f"#!/bin/sh\necho $$ > {pidfile}\nexec sleep 60\n")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    env = accel_env(PATH=f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    res = _interrupt_when(pidfile, env)
    _clean_130(res)
    pid = int(pidfile.read_text())
    for _ in range(100):
        if not _alive(pid):
            break
        time.sleep(0.05)
    assert not _alive(pid), "the hung tool outlived accel"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _interrupt_when(pidfile: Path, env: dict[str, str]) -> Interrupted:
    """``accel ls`` over the fake tool, interrupted 0.2 s after the tool started."""
    environ = dict(env)
    environ["PYTHONPROFILEIMPORTTIME"] = "1"
    proc = subprocess.Popen(
        [*ACCEL, "ls", "--backend", "ascend", "--timeout", "120"],
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=foreground_signals,
    )
    deadline = time.monotonic() + 30
    while not pidfile.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.02)
    assert pidfile.exists(), "the fake npu-smi never ran"
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    return Interrupted(proc.returncode, out.decode(), err.decode(), reached_main=True, trigger="tool started")


_HARNESS = """
import signal, sys, time, weakref
import accel.cli as cli
sys.unraisablehook = cli._unraisable(sys.unraisablehook)
signal.signal(signal.SIGINT, cli._on_sigint)
print("ready", flush=True)
{body}
"""

# The interrupt lands inside a weakref callback, where an exception cannot propagate (Python
# would print "Exception ignored in ..." and carry on): it is delivered again, in ordinary code.
_IN_A_CALLBACK = """
class Thing:
    pass
keep = []
def callback(ref):
    signal.raise_signal(signal.SIGINT)
try:
    thing = Thing()
    keep.append(weakref.ref(thing, callback))
    del thing
    for _ in range(5000):
        time.sleep(0.001)
    print("not interrupted", flush=True)
except KeyboardInterrupt:
    print("interrupted", flush=True)
"""

# Code that swallows the interrupt and carries on: the grace timer ends the process with 130.
_SWALLOWED = """
while True:
    try:
        time.sleep(0.01)
    except KeyboardInterrupt:
        print("swallowed", flush=True)
"""


def _harness(body: str, *, send: bool) -> subprocess.CompletedProcess[str]:
    with subprocess.Popen(
        [sys.executable, "-c", _HARNESS.format(body=body)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=accel_env(),
    ) as proc:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n"
        if send:
            time.sleep(0.1)
            proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_an_interrupt_inside_a_finaliser_is_delivered_again() -> None:
    res = _harness(_IN_A_CALLBACK, send=False)
    assert res.stdout == "interrupted\n" and res.stderr == "", res.stderr


def test_an_interrupt_swallowed_by_the_command_still_ends_it_with_130() -> None:
    from accel.cli import INTERRUPT_GRACE_S

    started = time.monotonic()
    res = _harness(_SWALLOWED, send=True)
    assert res.returncode == EXIT_INTERRUPTED and res.stderr == ""
    assert res.stdout == "swallowed\n"  # a second signal would not interrupt again
    assert time.monotonic() - started < INTERRUPT_GRACE_S + 30


def test_importing_accel_cli_is_light_and_leaves_signals_alone() -> None:
    """What the console script imports before main can guard anything: no argparse, no model."""
    code = (
        "import signal, sys, accel\n"
        "before = set(sys.modules); handler = signal.getsignal(signal.SIGINT)\n"
        "import accel.cli\n"
        "assert signal.getsignal(signal.SIGINT) is handler, 'importing accel.cli changed SIGINT'\n"
        "print(' '.join(sorted(set(sys.modules) - before)))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=accel_env(), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert set(proc.stdout.split()) <= {"accel.cli", "signal"}, proc.stdout


def test_main_with_argv_leaves_signals_alone(capsys: pytest.CaptureFixture[str]) -> None:
    from accel.cli import main

    handler = signal.getsignal(signal.SIGINT)
    assert main(["schema"]) == 0
    assert signal.getsignal(signal.SIGINT) is handler
    capsys.readouterr()


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_a_process_started_with_sigint_ignored_keeps_it_ignored() -> None:
    """``accel watch &`` from a script (a shell without job control starts it with SIGINT
    ignored): a Ctrl-C meant for the shell's foreground job does not end it; SIGTERM does."""
    with subprocess.Popen([*ACCEL, *WATCH], env=accel_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          text=True, preexec_fn=_ignore_sigint) as proc:
        try:
            assert proc.stdout is not None
            deadline = time.monotonic() + 60
            while "refresh 2" not in proc.stdout.readline():
                assert proc.poll() is None and time.monotonic() < deadline, "watch did not refresh"
            proc.send_signal(signal.SIGINT)
            seen = 0
            end = time.monotonic() + 2.0
            while time.monotonic() < end:  # it goes on refreshing after the SIGINT
                if "refresh" in proc.stdout.readline():
                    seen += 1
            assert proc.poll() is None and seen > 0, (proc.returncode, seen)
            proc.terminate()
            assert proc.wait(timeout=30) == -signal.SIGTERM
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
