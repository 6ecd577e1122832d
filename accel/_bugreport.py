"""Bug-report bundles: record what the backends ran, so ``accel ls --replay BUNDLE`` replays it.

Work in progress (issue 13).  Present: :class:`RecordingRunner` (wraps any runner and keeps
every run as a replay recording) and :func:`write_bundle` (writes the recordings, in the
``ReplayRunner`` JSON format, plus ``MANIFEST`` (JSON, but not named ``*.json``: the replayer
loads every ``*.json`` file as a recording) into a directory, atomically: a temporary
sibling directory renamed into place, so a failure leaves no half bundle; size-capped, over the
cap a typed :class:`~accel.errors.ConfigError` and nothing written).  ``accel bugreport --out DIR``
(:func:`accel.cli` ``cmd_bugreport``) wraps every backend's runner in a :class:`RecordingRunner`,
reads the inventory once, and writes the bundle with that inventory as ``INVENTORY``.  Not yet:
a copy of the sysfs files the backends read (a replay has no sysfs enrichment) and a tarball form.

No environment variables and no hostname are written: only argv, exit status, stdout and
stderr of each run (what the replay needs), and the manifest fields.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .errors import ConfigError
from .tools import DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_TIMEOUT_S, Recording, Runner, StrPath, ToolResult

__all__ = ["DEFAULT_MAX_BYTES", "RecordingRunner", "write_bundle"]

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
"""The default size cap of a bundle (64 MiB of recordings and manifest)."""


@dataclass
class RecordingRunner:
    """A runner that delegates to ``inner`` and keeps every completed run as a :class:`Recording`."""

    inner: Runner
    recordings: list[Recording] = field(default_factory=list)

    @property
    def calls(self) -> list[tuple[str, ...]]:
        """The argv of recent runs, as the inner runner saw them."""
        return self.inner.calls

    @property
    def call_count(self) -> int:
        """How many runs the inner runner has seen."""
        return self.inner.call_count

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
        """Run through ``inner`` (never checking there), record the outcome, then check."""
        result = self.inner.run(
            argv,
            timeout_s=timeout_s,
            max_output_bytes=max_output_bytes,
            env=env,
            search_path=search_path,
            cwd=cwd,
            check=False,
        )
        self.recordings.append(
            Recording(argv=tuple(argv), stdout=result.stdout, stderr=result.stderr, returncode=result.returncode)
        )
        return result.check() if check else result

    def which(self, name: str, search_path: Sequence[str] = ()) -> str | None:
        """Where ``name`` would be found (asks ``inner``)."""
        return self.inner.which(name, search_path)


def _recording_json(rec: Recording) -> bytes:
    obj = {"argv": list(rec.argv), "stdout": rec.stdout, "stderr": rec.stderr, "returncode": rec.returncode}
    return json.dumps(obj, indent=2, ensure_ascii=False).encode("utf-8")


def write_bundle(
    out: StrPath,
    recordings: Sequence[Recording],
    *,
    version: str,
    backends: Sequence[str],
    max_bytes: int = DEFAULT_MAX_BYTES,
    extra: Mapping[str, bytes] | None = None,
) -> Path:
    """Write ``recordings`` and ``MANIFEST`` into the new directory ``out``; return its path.

    Raises :class:`~accel.errors.ConfigError` if ``out`` exists or the bundle would exceed
    ``max_bytes``; nothing is left behind on any failure.
    """
    target = Path(out)
    if target.exists():
        raise ConfigError(f"--out: {str(target)!r} already exists")
    files: dict[str, bytes] = {}
    seen: set[tuple[str, ...]] = set()
    for rec in recordings:
        if rec.key in seen:  # a replay answers each argv with one recording
            continue
        seen.add(rec.key)
        files[f"{len(files):04d}-{Path(rec.argv[0]).name}.json"] = _recording_json(rec)
    manifest = {
        "accel_version": version,
        "backends": list(backends),
        "commands": [json.loads(data)["argv"] for data in files.values()],
        "files": {name: len(data) for name, data in files.items()},
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    for name, data in (extra or {}).items():
        if name.endswith(".json") or "/" in name or name in files or name == "MANIFEST":
            raise ConfigError(f"bug report: extra file name {name!r} is not allowed")
        files[name] = data
    manifest["extra"] = sorted(extra or ())
    files["MANIFEST"] = json.dumps(manifest, indent=2).encode("utf-8")
    total = sum(len(d) for d in files.values())
    if total > max_bytes:
        raise ConfigError(f"bug report would be {total} bytes, over the cap of {max_bytes} (--max-bytes)")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        for name, data in files.items():
            (tmp / name).write_bytes(data)
        tmp.rename(target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target
