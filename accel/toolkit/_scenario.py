"""Replay scenarios: recorded tool outputs that stand in for a host, in tests and demos.

A scenario is a directory of :mod:`accel.tools` recording JSON files (one per command) whose
``stdout_file`` points at sample text copied verbatim next to them.  Plugins ship theirs as
package data under ``<plugin package>/scenarios/<name>/``; ``accel ls --backend ascend
--replay <dir>`` and ``--option scenario=<name>`` both replay one.  :class:`ReplayScenario`
writes new ones (tests build variants such as a hung tool in a temporary directory).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from accel.errors import ConfigError
from accel.tools import ReplayRunner

from ._native_path import NATIVE_STATE_FILE

__all__ = ["ReplayScenario", "scenario_names", "scenario_path", "shipped_scenario_runner"]


def _root(package: str) -> Path:
    return Path(str(resources.files(package))) / "scenarios"


def scenario_names(package: str) -> tuple[str, ...]:
    """Names of the scenarios ``package`` ships: directories under ``scenarios/`` with a recording
    (``*.json``) or, for a plugin that reads only a library, the library's state alone
    (:data:`~accel.toolkit.NATIVE_STATE_FILE`, which its fake answers from)."""
    root = _root(package)
    if not root.is_dir():
        return ()
    return tuple(
        sorted(
            p.name
            for p in root.iterdir()
            if p.is_dir() and (any(p.glob("*.json")) or (p / NATIVE_STATE_FILE).is_file())
        )
    )


def scenario_path(package: str, name: str) -> Path:
    """The directory of shipped scenario ``name``; :class:`ConfigError` lists the valid names."""
    names = scenario_names(package)
    if name not in names:
        raise ConfigError(f"no replay scenario {name!r} in {package}; available: {', '.join(names) or 'none'}")
    return _root(package) / name


def shipped_scenario_runner(package: str, name: str) -> ReplayRunner:
    """A :class:`~accel.tools.ReplayRunner` over shipped scenario ``name``."""
    return ReplayRunner(scenario_path(package, name))


class ReplayScenario:
    """Write a replay scenario directory::

        sc = ReplayScenario(tmp_path / "hung")
        sc.add(["npu-smi", "info"], sample=SAMPLES / "npu-smi-info_24.1.rc1.b030_910b3_8npu.txt")
        sc.add(["npu-smi", "info", "-m"], stdout="...", delay_s=60)   # a hung tool
        runner = sc.runner()

    ``sample`` files are copied byte for byte into the directory (their names kept) and
    referenced by ``stdout_file``, so a shipped scenario carries its evidence with it.
    """

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)

    def add(
        self,
        argv: Sequence[str],
        *,
        sample: str | Path | None = None,
        stdout: str | None = None,
        stderr: str = "",
        returncode: int = 0,
        delay_s: float | None = None,
        comment: str | None = None,
        name: str | None = None,
    ) -> Path:
        """Record ``argv``; returns the JSON file written (``name`` or one derived from argv)."""
        if (sample is None) == (stdout is None):
            raise ConfigError("give exactly one of sample= or stdout=")
        record: dict[str, object] = {"argv": list(argv), "returncode": returncode, "stderr": stderr}
        if sample is not None:
            src = Path(sample)
            if src.suffix == ".json":
                raise ConfigError(f"sample {src.name!r} ends in .json and would be read as a recording")
            dest = self.directory / src.name
            if src.resolve() != dest.resolve():
                shutil.copyfile(src, dest)
            record["stdout_file"] = src.name
        else:
            record["stdout"] = stdout
        if delay_s is not None:
            record["delay_s"] = delay_s
        if comment is not None:
            record["comment"] = comment
        fname = name or ("_".join(a.replace("/", "_").lstrip("-") or "x" for a in argv) + ".json")
        target = self.directory / fname
        target.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        return target

    def runner(self) -> ReplayRunner:
        return ReplayRunner(self.directory)
