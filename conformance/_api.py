"""The argparse-free entry points the ``accel conformance`` command calls.

* :func:`run`: run the kit against one backend in a child ``pytest`` and write the run directory.
* :func:`run_all`: run every shipped scenario of every installed backend; write the combined matrix.
* :func:`report`: merge the results of several run directories into one matrix.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from accel.errors import ConfigError
from accel.plugin import ENTRY_POINT_GROUP

from ._bundle import write_matrix
from ._records import load_results
from ._scenarios import _class_name, all_scenarios

__all__ = ["RunResult", "report", "run", "run_all"]

_INI = """[pytest]
xfail_strict = true
filterwarnings =
    error
addopts = -p no:cacheprovider
"""


@dataclass(frozen=True)
class RunResult:
    """What a run left: pytest's exit code, the parsed results and where the files are."""

    exit_code: int
    report_dir: Path | None
    results: dict[str, Any] | None
    command: tuple[str, ...]
    output: str
    matrix: dict[str, Path] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """pytest exited 0: no row failed (and, in certify mode, every required row passed)."""
        return self.exit_code == 0


def _pytest(work: Path, args: list[str], *, echo: bool, timeout_s: float | None) -> tuple[int, str, tuple[str, ...]]:
    ini = work / "pytest.ini"
    ini.write_text(_INI, encoding="utf-8")
    cmd = (sys.executable, "-m", "pytest", "-c", str(ini), "--rootdir", str(work), "-q", *args)
    env = dict(os.environ)
    env.pop("PYTEST_ADDOPTS", None)  # the kit's own settings, not the caller's project's
    try:
        proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=timeout_s,
                              check=False, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        raise ConfigError(f"the conformance run did not finish within {timeout_s} s: {' '.join(cmd)}") from exc
    output = proc.stdout + proc.stderr
    if echo:
        sys.stdout.write(output)
    return proc.returncode, output, cmd


def run(
    backend: str,
    *,
    report: str | os.PathLike[str] | None = None,
    options: Mapping[str, str] | None = None,
    scenario: str | None = None,
    certify: bool = False,
    pytest_args: Sequence[str] = (),
    echo: bool = False,
    timeout_s: float | None = None,
) -> RunResult:
    """Run the conformance suite against ``backend`` (``accel conformance run --backend NAME``).

    ``report`` is the run directory (results.json, junit.xml, run.log, matrix.{md,json,html},
    ``suite/`` with the generated module, ``pytest-output.txt``; plus the bundle with
    ``certify``); without it the run happens in a temporary directory and only the parsed
    results come back.  ``options`` become ``BackendConfig.options``; ``scenario`` picks one of
    the plugin's ``CONFORMANCE_SCENARIOS``.  ``echo`` prints pytest's output.
    """
    if not backend:
        raise ConfigError("run() needs a backend name")
    installed = sorted({ep.name for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)})
    if backend not in installed:
        # Say so once, rather than letting every row of the suite error on the same missing plugin.
        raise ConfigError(f"no backend {backend!r} is installed (accel.backends entry points: {', '.join(installed)})")
    with tempfile.TemporaryDirectory(prefix="accel-conformance-run-") as tmp:
        out = (Path(report) if report is not None else Path(tmp) / "report").resolve()
        out.mkdir(parents=True, exist_ok=True)
        args = ["--accel-backend", backend, "--accel-report", str(out)]
        for key, value in (options or {}).items():
            args += ["--accel-option", f"{key}={value}"]
        if scenario:
            args += ["--accel-scenario", scenario]
        if certify:
            args.append("--accel-certify")
        # The run directory is pytest's rootdir too, so node ids read suite/test_accel_<name>.py::...
        code, output, cmd = _pytest(out, [*args, *pytest_args], echo=echo, timeout_s=timeout_s)
        (out / "pytest-output.txt").write_text(output, encoding="utf-8")
        results = load_results(out) if (out / "results.json").is_file() else None
        paths = {k: out / f"matrix.{k}" for k in ("md", "json", "html") if (out / f"matrix.{k}").is_file()}
        return RunResult(code, Path(report) if report is not None else None, results, cmd, output,
                         paths if report is not None else {})


def run_all(
    out: str | os.PathLike[str],
    *,
    backends: Sequence[str] | None = None,
    echo: bool = False,
    timeout_s: float | None = None,
    keep_results: bool = False,
) -> RunResult:
    """Run every shipped scenario of every installed backend and write the combined matrix to ``out``.

    This is ``python -m accel.conformance.matrix --all --out docs/conformance/``.  Scenarios
    come from each plugin's ``conformance.CONFORMANCE_SCENARIOS`` (see :mod:`accel.conformance`).
    ``keep_results`` also writes ``results.json`` and ``junit.xml`` into ``out``.
    """
    found = all_scenarios(list(backends) if backends else None)
    if not found:
        raise ConfigError("no installed backend ships conformance scenarios")
    lines = ['"""Generated by accel.conformance.run_all: one suite per shipped scenario."""', "",
             "from accel.conformance import suite_for", ""]
    for backend, scenarios in found.items():
        for name in scenarios:
            cls = _class_name(backend, name)
            lines.append(f"{cls} = suite_for({backend!r}, {name!r})")
    target = Path(out)
    with tempfile.TemporaryDirectory(prefix="accel-conformance-all-") as tmp:
        work = Path(tmp)
        module = work / "test_accel_all_scenarios.py"
        module.write_text("\n".join(lines) + "\n", encoding="utf-8")
        results_dir = work / "results"
        code, output, cmd = _pytest(work, [str(module), "--accel-report", str(results_dir)], echo=echo,
                                    timeout_s=timeout_s)
        if not (results_dir / "results.json").is_file():
            raise ConfigError(f"the conformance run wrote no results (exit {code}):\n{output[-3000:]}")
        doc = load_results(results_dir)
        paths = write_matrix(target, [doc])
        if keep_results:
            for name in ("results.json", "junit.xml"):
                if (results_dir / name).is_file():
                    (target / name).write_bytes((results_dir / name).read_bytes())
    return RunResult(code, target, doc, cmd, output, paths)


def report(run_dirs: Sequence[str | os.PathLike[str]], out: str | os.PathLike[str]) -> dict[str, Path]:
    """Merge several runs (directories, results.json or junit.xml files) into one matrix in ``out``.

    This is ``accel conformance report RUN_DIRS... --out DIR``; returns the written paths
    (keys ``md``, ``json``, ``html``).  A path without results raises ``ConfigError`` naming it.
    """
    if not run_dirs:
        raise ConfigError("report() needs at least one run directory")
    docs = [load_results(Path(p)) for p in run_dirs]
    return write_matrix(Path(out), docs)
