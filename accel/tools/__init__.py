"""Run vendor command-line tools safely: the only way an accel plugin runs a vendor CLI.

Plugins for CLI-based vendors (``npu-smi``, ``cnmon``, ``hy-smi``, ``mx-smi``...) never call
:mod:`subprocess` themselves.  They receive a :class:`Runner` and call ``runner.run(argv)``::

    def inventory(self) -> HostInventory:
        result = self._runner.run(
            ["npu-smi", "info", "-m"],
            search_path=("/usr/local/sbin", "/usr/local/bin"),
            timeout_s=5.0,
        )
        return parse_mapping(result.stdout)

What every run guarantees, for the real :class:`SubprocessRunner` and the :class:`ReplayRunner`
used in tests alike:

* **No shell.** ``argv`` is a list of arguments; a plain string is refused with
  :class:`~accel.errors.ConfigError`.
* **Resolution.** ``argv[0]`` is an absolute path (checked as is) or a bare name looked up in
  ``search_path`` first (vendor tools live in ``/usr/local/sbin``, ``/opt/hyhal/bin``...) and then
  in ``PATH``.  Empty and relative ``PATH`` entries are ignored, so a tool is never picked up from
  the current directory.  The child sees ``argv[0]`` as you wrote it.
* **A clean environment.** The child gets only ``PATH`` and ``HOME`` from this process, plus
  ``LANG=C`` and ``LC_ALL=C`` (vendor tools localise their output), plus whatever you pass in
  ``env`` (which wins).  Stdin is ``/dev/null``.
* **A timeout that holds.** The child starts in its own session (process group).  At the deadline
  the *whole group* is sent ``SIGKILL``, so helpers the tool forked die too, and the child is
  reaped.  :class:`~accel.errors.ToolTimeoutError` follows.  A descendant that keeps the output
  pipes open after the tool itself has exited also counts as a hang.
* **An output cap.** Output is read incrementally; once stdout and stderr together pass
  ``max_output_bytes`` the group is killed and :class:`~accel.errors.ToolOutputTooLargeError` is
  raised, so a runaway tool cannot eat memory.
* **Decoding that never fails.** Output is decoded as UTF-8 with ``errors="replace"``: GBK text
  and garbage bytes become U+FFFD instead of exceptions.
* **Typed errors**, all :class:`~accel.errors.ToolError` subclasses carrying ``tool`` (the basename)
  and ``argv``: :class:`~accel.errors.ToolNotFoundError` (says where it looked),
  :class:`~accel.errors.ToolNotExecutableError`, :class:`~accel.errors.ToolTimeoutError`,
  :class:`~accel.errors.ToolOutputTooLargeError`, :class:`~accel.errors.ToolExitError` (non-zero
  exit, with ``returncode`` and the stderr tail; pass ``check=False`` to get the
  :class:`ToolResult` instead) and :class:`~accel.errors.ReplayMissingError`.  Bad arguments
  (a string argv, a relative search directory, a zero timeout) raise
  :class:`~accel.errors.ConfigError`.

Testing without hardware: record real runs once with :class:`RecordingRunner`, commit the JSON
files, and hand the plugin a :class:`ReplayRunner` over that directory.  A recording is one
JSON object per file::

    {"argv": ["npu-smi", "info", "-m"], "returncode": 0, "stderr": "",
     "stdout_file": "npu-smi-info-m_910b_8npu_with-mcu.txt"}

Keys: ``argv`` (required, a non-empty list of strings), ``stdout`` or ``stdout_file``,
``stderr`` or ``stderr_file`` (files read as bytes and decoded like real output), ``returncode``
(default 0), ``delay_s`` (the replayer sleeps that long; more than the caller's ``timeout_s``
simulates a hung tool), and the informational ``duration_s`` and ``comment``.  Any other key
is an error, so typos do not pass silently.

A recording reads nothing outside its own directory (a bug-report bundle is data from
someone else): ``stdout_file`` and ``stderr_file`` are relative paths without ``..``
(``sample.txt``, ``samples/sample.txt``) whose resolved path, symlinks followed, lies inside
the recording's directory, and name a regular file of at most
:data:`MAX_REPLAY_FILE_BYTES`; a recording file that is a symlink must resolve inside it too.
Anything else (an absolute path, ``../x``, a symlink out) is a
:class:`~accel.errors.ConfigError` naming the recording and the key, raised before the file
is opened, and no message quotes a file's content.  Copy shared samples next to the
recordings (:class:`accel.toolkit.ReplayScenario` does).
Recordings are matched on the whole argv, with ``argv[0]`` compared by basename:
``/usr/local/sbin/npu-smi info`` matches a recording of ``npu-smi info``.

Every runner counts its invocations (``runner.call_count``, and the recent argv in
``runner.calls``), so a plugin can report "tool invocations per snapshot".  All runners are
thread-safe.  POSIX only.
"""

from __future__ import annotations

from ._checks import which
from ._record import RecordingRunner
from ._recordings import MAX_REPLAY_FILE_BYTES, Recording
from ._replay import ReplayRunner
from ._result import DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_TIMEOUT_S, TOOL_RUN_EVENT, ToolResult
from ._result import StrPath as StrPath  # the type of path arguments: importable, not exported
from ._runners import Runner, SubprocessRunner
from ._running import kill_running_tools, run

__all__ = [
    "DEFAULT_MAX_OUTPUT_BYTES",
    "DEFAULT_TIMEOUT_S",
    "MAX_REPLAY_FILE_BYTES",
    "TOOL_RUN_EVENT",
    "Recording",
    "RecordingRunner",
    "ReplayRunner",
    "Runner",
    "SubprocessRunner",
    "ToolResult",
    "kill_running_tools",
    "run",
    "which",
]

for _name in __all__:  # the public objects say where users import them from, as httpx does
    _obj = globals()[_name]
    if getattr(_obj, "__module__", "").startswith(__name__ + "."):
        _obj.__module__ = __name__
del _name, _obj
