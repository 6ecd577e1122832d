"""Results of a conformance run as data: recorded by the pytest plugin, read back for reports.

A run writes ``results.json`` (pytest's own records, collected by the plugin's hooks) and, through
pytest, ``junit.xml`` whose test cases carry the same facts as ``<property>`` elements.  Reports
are built from either file (:func:`load_results`), never by hand.
"""

from __future__ import annotations

import json
import platform
import socket
import sys
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, Final

import pytest

import accel
from accel.errors import ConfigError

from ._requirements import REQUIREMENTS, Level

__all__ = [
    "RESULTS_SCHEMA",
    "RowResult",
    "Status",
    "certification",
    "load_results",
    "note_run",
]

RESULTS_SCHEMA: Final = "accel-conformance-results/1"


class Status(StrEnum):
    """The outcome of one row for one backend, as the matrix shows it."""

    PASS = "pass"
    FAIL = "fail"
    ERROR = "error"
    SKIP = "skip"
    NOT_APPLICABLE = "n/a"
    XFAIL = "xfail"
    OVERRIDDEN = "overridden"
    NOT_RUN = "not run"

    @property
    def symbol(self) -> str:
        """The compact Markdown cell (OTel / ADBC style)."""
        return _SYMBOLS[self]


_SYMBOLS: Final = {
    Status.PASS: "+",
    Status.FAIL: "-",
    Status.ERROR: "E",
    Status.SKIP: "skip",
    Status.NOT_APPLICABLE: "N/A",
    Status.XFAIL: "xfail",
    Status.OVERRIDDEN: "override",
    Status.NOT_RUN: "?",
}


@dataclass
class RowResult:
    """One row's outcome in one run."""

    id: str
    status: Status
    message: str = ""
    nodeid: str = ""
    duration_s: float = 0.0
    measured: str | None = None

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["status"] = self.status.value
        return data


@dataclass
class _State:
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    #: run key (the suite class's node id) -> run metadata, filled at class teardown.
    meta: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: run key -> label, known from collection (in case the class fixture never ran).
    labels: dict[str, dict[str, Any]] = field(default_factory=dict)
    rows: dict[str, dict[str, RowResult]] = field(default_factory=dict)


STATE_KEY: Final = pytest.StashKey[_State]()


def state(config: pytest.Config) -> _State:
    found = config.stash.get(STATE_KEY, None)
    if found is None:
        found = _State()
        config.stash[STATE_KEY] = found
    return found


def note_run(config: pytest.Config, key: str, meta: dict[str, Any]) -> None:
    """Record the metadata of one suite class's run (called by the suite at class teardown)."""
    state(config).meta[key] = meta


def note_row(config: pytest.Config, key: str, result: RowResult) -> None:
    state(config).rows.setdefault(key, {})[result.id] = result


def _host() -> str:
    try:
        return socket.gethostname()
    except OSError:  # pragma: no cover - no hostname in a sandbox
        return "unknown"


def build_results(st: _State, *, certify: bool) -> dict[str, Any]:
    """The ``results.json`` document of a session."""
    runs = []
    for key in sorted(set(st.labels) | set(st.meta) | set(st.rows)):
        meta = dict(st.labels.get(key, {}))
        meta.update(st.meta.get(key, {}))
        meta["key"] = key
        meta["rows"] = {rid: r.as_dict() for rid, r in sorted(st.rows.get(key, {}).items())}
        runs.append(meta)
    doc: dict[str, Any] = {
        "schema": RESULTS_SCHEMA,
        "accel_version": accel.__version__,
        "pytest_version": pytest.__version__,
        "python": platform.python_version(),
        "platform": sys.platform,
        "host": _host(),
        "started_at": st.started_at.isoformat(),
        "finished_at": datetime.now(UTC).isoformat(),
        "certify": certify,
        "runs": runs,
    }
    doc["certification"] = certification(doc) if certify else None
    return doc


def certification(doc: dict[str, Any]) -> dict[str, Any]:
    """Certify-mode verdict: every required row passed (or is N/A), none skipped, none overridden.

    Like Kubernetes' certified-conformance mode, a skip of a required row fails: a row that
    could not be checked has not been shown to hold.  Rows gated on an undeclared capability are
    N/A and allowed.  Any failure of any level also fails the run (pytest already says so).
    """
    violations = []
    for run in doc["runs"]:
        rows = run.get("rows", {})
        for rid, req in REQUIREMENTS.items():
            result = rows.get(rid)
            status = Status(result["status"]) if result else Status.NOT_RUN
            if status in (Status.FAIL, Status.ERROR):
                violations.append(f"{run['label']}: {rid} {status.value}: {result['message'] if result else ''}")
            elif req.level is Level.REQUIRED and status not in (Status.PASS, Status.NOT_APPLICABLE):
                why = (result or {}).get("message") or "the row did not run"
                violations.append(f"{run['label']}: required {rid} is {status.value}: {why}")
    return {"passed": not violations, "violations": violations}


# -- reading results back --------------------------------------------------------------------
def load_results(path: Path) -> dict[str, Any]:
    """Read a run: a ``results.json``, a ``junit.xml``, or a run directory holding either.

    Raises :class:`~accel.errors.ConfigError` naming the path when it holds neither.
    """
    path = Path(path)
    if path.is_dir():
        for name in ("results.json", "junit.xml"):
            if (path / name).is_file():
                return load_results(path / name)
        raise ConfigError(f"{path}: no results.json or junit.xml (run 'accel conformance run --report {path}')")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read conformance results {path}: {exc.strerror or exc}") from exc
    if path.suffix == ".xml":
        return _from_junit(text, str(path))
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not JSON: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("schema") != RESULTS_SCHEMA:
        raise ConfigError(f"{path}: not an accel conformance results file (schema {RESULTS_SCHEMA!r})")
    return doc


def _from_junit(text: str, source: str) -> dict[str, Any]:
    """Rebuild the results document from the properties the plugin put on each test case."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise ConfigError(f"{source}: not a JUnit XML file: {exc}") from exc
    runs: dict[str, dict[str, Any]] = {}
    for case in root.iter("testcase"):
        props = {p.get("name", ""): p.get("value", "") for p in case.iter("property")}
        rid, key = props.get("accel_requirement"), props.get("accel_run")
        if not rid or not key:
            continue
        run = runs.setdefault(key, {"key": key, "label": props.get("accel_label", key), "rows": {}})
        if "accel_run_meta" in props:
            run.update(json.loads(props["accel_run_meta"]))
        status = props.get("accel_status")
        message = props.get("accel_message", "")
        if case.find("error") is not None and status in (None, Status.PASS.value):
            status, message = Status.ERROR.value, case.find("error").get("message", "")  # type: ignore[union-attr]
        run["rows"][rid] = {
            "id": rid,
            "status": status or Status.NOT_RUN.value,
            "message": message,
            "nodeid": f"{case.get('classname', '')}::{case.get('name', '')}",
            "duration_s": float(case.get("time", "0") or 0),
            "measured": props.get("accel_measured"),
        }
    if not runs:
        raise ConfigError(f"{source}: no accel conformance test cases (was the suite run with the accel plugin?)")
    return {
        "schema": RESULTS_SCHEMA,
        "source": "junit",
        "accel_version": next((r.get("accel_version") for r in runs.values() if r.get("accel_version")), None),
        "host": None,
        "started_at": root.find("testsuite").get("timestamp") if root.find("testsuite") is not None else None,  # type: ignore[union-attr]
        "certify": False,
        "certification": None,
        "runs": [runs[k] for k in sorted(runs)],
    }
