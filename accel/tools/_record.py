"""The :class:`RecordingRunner`: runs through another runner and records each completed run."""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from accel.errors import ConfigError

from ._recordings import Recording, _match_key
from ._result import DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_TIMEOUT_S, StrPath, ToolResult
from ._runners import _DEFAULT_HISTORY, Runner, _CallLog


def _slug(argv: Sequence[str]) -> str:
    words = _match_key(argv)
    text = re.sub(r"[^A-Za-z0-9.-]+", "_", "_".join(words)).strip("._-")[:80] or "run"
    digest = hashlib.sha256("\0".join(words).encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{text}-{digest}.json"


class RecordingRunner(_CallLog):
    """A runner that passes every call to ``inner`` and records each completed run as JSON.

    Wrap the real runner on a machine with the hardware, exercise the plugin, and commit the
    directory as a replay scenario::

        runner = RecordingRunner(SubprocessRunner(), "tests/scenarios/atlas800t-a2")
        backend = AscendPlugin().open(config, runner=runner)
        backend.inventory()

    One file per distinct argv, named from the command (``npu-smi_info_-m-<hash>.json``); a
    repeated argv overwrites its file, so the latest run wins.  Runs that exit non-zero are
    recorded too (then ``check`` is applied as usual).  Runs that did not complete (tool not
    found, timeout, output too large) are not recorded; their error propagates.  Writes are
    atomic.  ``which`` is passed through to ``inner``.

    Without ``directory`` nothing is written: every completed run is kept, in order, in
    :attr:`recordings` (what ``accel bugreport`` bundles).

    :param inner: the runner that really runs the tools, usually :class:`SubprocessRunner`.
    :param directory: where recordings go; created if missing.  ``None``: in memory only.
    :param history: how many recent argv ``calls`` keeps.
    """

    def __init__(self, inner: Runner, directory: StrPath | None = None, *, history: int = _DEFAULT_HISTORY) -> None:
        super().__init__(history)
        self._inner = inner
        self._dir = Path(directory) if directory is not None else None
        self._write_lock = threading.Lock()
        #: Every completed run, in order, when recording in memory (no ``directory``).
        self.recordings: list[Recording] = []
        if self._dir is not None:
            try:
                self._dir.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise ConfigError(f"cannot create recording directory {str(self._dir)!r}: {exc}") from exc

    @property
    def directory(self) -> Path | None:
        """The directory recordings are written to (``None``: in memory)."""
        return self._dir

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
        env: Mapping[str, str] | None = None,
        search_path: Sequence[str] = (),
        cwd: StrPath | None = None,
        check: bool = True,
    ) -> ToolResult:
        """Run through ``inner`` and record the result; see :func:`accel.tools.run`."""
        self._note(argv)
        result = self._inner.run(
            argv,
            timeout_s=timeout_s,
            max_output_bytes=max_output_bytes,
            env=env,
            search_path=search_path,
            cwd=cwd,
            check=False,
        )
        self._write(result)
        return result.check() if check else result

    def _write(self, result: ToolResult) -> None:
        if self._dir is None:
            rec = Recording(argv=tuple(result.argv), stdout=result.stdout, stderr=result.stderr,
                            returncode=result.returncode)
            with self._write_lock:
                self.recordings.append(rec)
            return
        record = {
            "argv": list(result.argv),
            "returncode": result.returncode,
            "duration_s": round(result.duration_s, 6),
            "stderr": result.stderr,
            "stdout": result.stdout,
        }
        try:
            text = json.dumps(record, indent=2, ensure_ascii=False)
            text.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates in argv: fall back to \u escapes
            text = json.dumps(record, indent=2, ensure_ascii=True)
        target = self._dir / _slug(result.argv)
        with self._write_lock:
            try:
                fd, tmp = tempfile.mkstemp(dir=self._dir, prefix=".recording-", suffix=".tmp")
                try:
                    with os.fdopen(fd, "w", encoding="utf-8") as fh:
                        fh.write(text + "\n")
                    os.replace(tmp, target)
                except BaseException:
                    os.unlink(tmp)
                    raise
            except OSError as exc:
                raise ConfigError(f"cannot write recording {str(target)!r}: {exc}") from exc

    def which(self, name: str, search_path: Sequence[str] = ()) -> str | None:
        """Passed through to ``inner``."""
        return self._inner.which(name, search_path)

    def __repr__(self) -> str:
        where = str(self._dir) if self._dir is not None else None
        return f"RecordingRunner({self._inner!r}, {where!r}, call_count={self.call_count})"
