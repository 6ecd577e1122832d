"""The conformance matrix: rows by section, columns by backend run, from recorded results.

:func:`build_matrix` merges any number of results documents (``results.json`` or rebuilt from
JUnit XML); :func:`render_markdown`, :func:`render_html` and :func:`render_json` turn the matrix
into files.  Nothing here is written by hand: every cell comes from a recorded outcome.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Final

import accel
from accel.plugin import CAPABILITY_DOCS, Capability

from ._records import Status
from ._requirements import REQUIREMENTS, SECTIONS

__all__ = ["MATRIX_SCHEMA", "build_matrix", "render_html", "render_json", "render_markdown"]

MATRIX_SCHEMA: Final = "accel-conformance-matrix/1"
_PASSING = {Status.PASS.value, Status.NOT_APPLICABLE.value}


def _column(run: dict[str, Any], doc: dict[str, Any]) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for rid in REQUIREMENTS:
        status = run.get("rows", {}).get(rid, {}).get("status", Status.NOT_RUN.value)
        counts[status] = counts.get(status, 0) + 1
    plugin = run.get("plugin") or {}
    return {
        "label": run["label"],
        "backend": run.get("backend"),
        "scenario": run.get("scenario"),
        "plugin": plugin,
        "driver_versions": run.get("driver_versions", []),
        "device_count": run.get("device_count"),
        "models": run.get("models", []),
        "declared": run.get("declared", []),
        "observed": run.get("observed"),
        "load_error": run.get("load_error"),
        "accel_version": doc.get("accel_version"),
        "host": doc.get("host"),
        "run_at": doc.get("started_at"),
        "certification": doc.get("certification"),
        "summary": dict(sorted(counts.items())),
    }


def _capability_cell(cap: Capability, run: dict[str, Any]) -> dict[str, Any]:
    declared = cap.value in set(run.get("declared", []))
    observed_list = run.get("observed")
    observed = None if observed_list is None else cap.value in set(observed_list)
    gated = [rid for rid, req in REQUIREMENTS.items() if req.capability is cap]
    statuses = [run.get("rows", {}).get(rid, {}).get("status", Status.NOT_RUN.value) for rid in gated]
    passed = sum(s == Status.PASS.value for s in statuses)
    failed = sum(s in (Status.FAIL.value, Status.ERROR.value) for s in statuses)
    if declared and failed:
        verdict, note = "-", f"declared, {failed} row(s) failed"
    elif declared and observed is False:
        verdict, note = "!", "declared, not observed in the snapshot"
    elif declared:
        verdict, note = "+", "declared" + (", observed" if observed else "")
    elif observed:
        verdict, note = "!", "observed but not declared"
    else:
        verdict, note = "N/A", "not declared"
    return {"declared": declared, "observed": observed, "rows_passed": passed, "rows_total": len(gated),
            "rows_failed": failed, "verdict": verdict, "note": note,
            "mismatch": verdict in ("-", "!")}


def build_matrix(docs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Merge results documents into one matrix (a later run of the same label gets a suffix)."""
    columns: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for doc in docs:
        for run in doc.get("runs", []):
            label = run["label"]
            seen[label] = seen.get(label, 0) + 1
            if seen[label] > 1:
                run = {**run, "label": f"{label} ({seen[label]})"}
            runs.append(run)
            columns.append(_column(run, doc))
    rows = []
    for rid, req in REQUIREMENTS.items():
        cells = {}
        for run in runs:
            r = run.get("rows", {}).get(rid)
            cells[run["label"]] = {
                "status": r["status"] if r else Status.NOT_RUN.value,
                "message": (r or {}).get("message", "") or "",
                "measured": (r or {}).get("measured"),
            }
        rows.append({"id": rid, "section": req.section, "level": req.level.value,
                     "capability": req.capability.value if req.capability else None, "doc": req.doc, "cells": cells})
    capabilities = [
        {"capability": cap.value, "doc": CAPABILITY_DOCS[cap],
         "cells": {run["label"]: _capability_cell(cap, run) for run in runs}}
        for cap in Capability
    ]
    return {
        "schema": MATRIX_SCHEMA,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "generated_by": f"accel {accel.__version__}",
        "sections": [{"id": s.id, "title": s.title, "doc": s.doc} for s in SECTIONS],
        "columns": columns,
        "rows": rows,
        "capabilities": capabilities,
    }


def render_json(matrix: dict[str, Any]) -> str:
    return json.dumps(matrix, indent=2, sort_keys=False) + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _cell_md(cell: dict[str, Any]) -> str:
    status = Status(cell["status"])
    return status.symbol


def _versions(col: dict[str, Any]) -> tuple[str, str, str]:
    plugin = col["plugin"] or {}
    version = f"{plugin.get('name', '?')} {plugin.get('version', '?')}"
    api = plugin.get("api_version_negotiated") or "none"
    drivers = ", ".join(col["driver_versions"]) or "-"
    return version, api, drivers


#: Outcomes named run by run in a requirement's line (the others are only counted).
_NAMED: Final = (Status.FAIL.value, Status.ERROR.value, Status.NOT_RUN.value, Status.OVERRIDDEN.value,
                 Status.XFAIL.value)
_ORDER: Final = [s.value for s in (Status.PASS, Status.FAIL, Status.ERROR, Status.XFAIL, Status.OVERRIDDEN,
                                   Status.SKIP, Status.NOT_APPLICABLE, Status.NOT_RUN)]


def _counts(statuses: Sequence[str]) -> str:
    """``"44 pass, 3 xfail, 1 skip"``: every outcome that occurs, in a fixed order."""
    found = {st: statuses.count(st) for st in _ORDER if st in statuses}
    return ", ".join(f"{n} {st}" for st, n in found.items()) or "-"


def _certification(cols: Sequence[dict[str, Any]]) -> str:
    certs = [c["certification"] for c in cols if c["certification"] is not None]
    if not certs:
        return "-"
    return "passed" if all(cert["passed"] for cert in certs) else "FAILED"


def _summary_md(matrix: dict[str, Any]) -> list[str]:
    """One line per plugin, then the whole: what a reader wants first."""
    cols = matrix["columns"]
    by_plugin: dict[str, list[dict[str, Any]]] = {}
    for c in cols:
        by_plugin.setdefault((c["plugin"] or {}).get("name", "?"), []).append(c)
    out = ["| Plugin | Runs | Certification | Result | Runs with a failure or known deviation |",
           "|---|---|---|---|---|"]
    every: list[str] = []
    for name, group in by_plugin.items():
        labels = {c["label"] for c in group}
        statuses = [r["cells"][lbl]["status"] for r in matrix["rows"] for lbl in labels]
        every += statuses
        flagged = sorted(lbl for lbl in labels
                         if any(r["cells"][lbl]["status"] in _NAMED for r in matrix["rows"]))
        version = f"{name} {(group[0]['plugin'] or {}).get('version', '?')}"
        out.append(f"| {_md(version)} | {len(group)} | {_certification(group)} | {_counts(statuses)} | "
                   f"{_md(', '.join(flagged)) or '-'} |")
    failed = every.count(Status.FAIL.value) + every.count(Status.ERROR.value)
    cert = _certification(cols)
    head = [f"{len(cols)} runs of {len(by_plugin)} plugins against {len(matrix['rows'])} requirements: "
            f"{failed} failed or errored, {every.count(Status.XFAIL.value)} known deviations (strict xfail). "
            + ("Certification: not run here (these are the shipped scenarios; `accel conformance run --certify` "
               "certifies one backend)." if cert == "-" else f"Certification: {cert}."), ""]
    return head + out


def render_markdown(matrix: dict[str, Any]) -> str:
    """GitHub-flavoured Markdown that reads at a laptop's width: a summary per plugin first, one
    line per requirement (runs named only where they did not pass), the backends table, the
    capabilities, the notes.  The full run-by-requirement grid is ``matrix.html``."""
    cols = matrix["columns"]
    out = [
        "# accel conformance matrix",
        "",
        f"Generated {matrix['generated_at']} by {matrix['generated_by']} from recorded test results "
        "(do not edit by hand). Every run against every requirement, as a grid: [matrix.html](matrix.html) "
        "(and `matrix.json`).",
        "",
        "## Summary",
        "",
        *_summary_md(matrix),
        "",
        "## Requirements",
        "",
        "One line per requirement: how the runs went, and which runs did not pass (a skip or `n/a` is "
        "only counted: `n/a` is a capability the plugin does not declare, the reason of a skip is under "
        "[Notes](#notes)). `xfail` is a known deviation, marked strict: it fails the run once fixed.",
    ]
    for sec in matrix["sections"]:
        rows = [r for r in matrix["rows"] if r["section"] == sec["id"]]
        out += ["", f"### {sec['title']}", "", sec["doc"], "",
                "| Requirement | Level | Capability | Result | Not passing |", "|---|---|---|---|---|"]
        for r in rows:
            statuses = [r["cells"][c["label"]]["status"] for c in cols]
            named = [f"{st}: " + ", ".join(c["label"] for c in cols if r["cells"][c["label"]]["status"] == st)
                     for st in _NAMED if st in statuses]
            out.append(f"| `{r['id']}` {_md(r['doc'])} | {r['level']} | {r['capability'] or '-'} | "
                       f"{_counts(statuses)} | {_md('; '.join(named)) or '-'} |")
    out += [
        "",
        "## Backends",
        "",
        "One row per run: a plugin on one of its shipped scenarios.",
        "",
        "| Run | Plugin | Plugin API | Driver | Devices | Models | Certification | Summary |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in cols:
        version, api, drivers = _versions(c)
        cert = c["certification"]
        cert_text = "-" if cert is None else ("passed" if cert["passed"] else "FAILED")
        summary = ", ".join(f"{n} {s}" for s, n in c["summary"].items())
        models = ", ".join(c["models"]) or (c["load_error"] or "-")
        out.append(f"| {_md(c['label'])} | {_md(version)} | {api} | {_md(drivers)} | "
                   f"{c['device_count'] if c['device_count'] is not None else '-'} | {_md(models)} | {cert_text} | "
                   f"{summary} |")
    out += ["", "## Declared against measured capabilities", "",
            "Per capability: the runs whose plugin declares it, and every run where declaration and "
            "measurement disagree (`-` declared but a gated row failed, `!` declared and not observed, or "
            "observed and not declared).", "",
            "| Capability | Declared by | Disagreements |", "|---|---|---|"]
    for cap in matrix["capabilities"]:
        cells = cap["cells"]
        declared = sum(1 for c in cols if cells[c["label"]]["declared"])
        mismatches = [f"{c['label']} {cells[c['label']]['verdict']} ({cells[c['label']]['note']})"
                      for c in cols if cells[c["label"]]["mismatch"]]
        out.append(f"| `{cap['capability']}` {_md(cap['doc'])} | {declared} of {len(cols)} runs | "
                   f"{_md('; '.join(mismatches)) or '-'} |")
    out += ["", "## Notes", ""]
    for c in cols:
        notes = []
        for r in matrix["rows"]:
            cell = r["cells"][c["label"]]
            if cell["status"] not in (Status.PASS.value,) and cell["message"]:
                notes.append(f"- `{r['id']}` {cell['status']}: {_md(cell['message'])}")
            elif cell["measured"]:
                notes.append(f"- `{r['id']}` measured: {_md(cell['measured'])}")
        for cap in matrix["capabilities"]:
            cell = cap["cells"][c["label"]]
            if cell["mismatch"]:
                notes.append(f"- capability `{cap['capability']}`: {cell['note']}")
        if notes:
            out += [f"### {c['label']}", "", *notes, ""]
    return "\n".join(out).rstrip() + "\n"


_CSS: Final = """
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}
h1{font-size:1.6em}h2{margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0}th,td{border:1px solid #ccc;padding:3px 8px;vertical-align:top}
th{background:#f4f4f4;text-align:left}td.cell{text-align:center;font-weight:600;min-width:6em}
.pass{background:#d8f5d0}.fail,.error{background:#f8d0d0}.skip{background:#fbeecb}
.na{background:#eee;color:#777}.xfail{background:#e6dcf5}.overridden{background:#fde2c4}.notrun{background:#fff}
.mismatch{outline:2px solid #c00}.doc{color:#555;font-size:.92em}code{font-size:.95em}
details{margin:.3em 0}small{color:#666}
"""

_CLASS: Final = {
    Status.PASS.value: "pass", Status.FAIL.value: "fail", Status.ERROR.value: "error",
    Status.SKIP.value: "skip", Status.NOT_APPLICABLE.value: "na", Status.XFAIL.value: "xfail",
    Status.OVERRIDDEN.value: "overridden", Status.NOT_RUN.value: "notrun",
}


def render_html(matrix: dict[str, Any]) -> str:
    """One self-contained page (inline CSS, no scripts, no external resources)."""
    e = html.escape
    cols = matrix["columns"]
    labels = [c["label"] for c in cols]
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        "<title>accel conformance matrix</title>", f"<style>{_CSS}</style></head><body>",
        "<h1>accel conformance matrix</h1>",
        f"<p>Generated {e(matrix['generated_at'])} by {e(matrix['generated_by'])} from recorded test results.</p>",
        "<h2 id=\"backends\">Backends</h2>",
        '<table id="backends-table"><tr><th>Run</th><th>Plugin</th><th>Plugin API</th><th>Driver</th>'
        "<th>Devices</th><th>Models</th><th>accel</th><th>Certification</th><th>Summary</th></tr>",
    ]
    for c in cols:
        version, api, drivers = _versions(c)
        cert = c["certification"]
        cert_text = "-" if cert is None else ("passed" if cert["passed"] else "FAILED")
        summary = ", ".join(f"{n} {s}" for s, n in c["summary"].items())
        parts.append(
            f"<tr><td>{e(c['label'])}</td><td>{e(version)}</td><td>{e(api)}</td><td>{e(drivers)}</td>"
            f"<td>{c['device_count'] if c['device_count'] is not None else '-'}</td>"
            f"<td>{e(', '.join(c['models']) or (c['load_error'] or '-'))}</td><td>{e(str(c['accel_version']))}</td>"
            f"<td>{cert_text}</td><td>{e(summary)}</td></tr>"
        )
    parts.append("</table>")
    head = "".join(f"<th>{e(lbl)}</th>" for lbl in labels)
    for sec in matrix["sections"]:
        parts += [f'<h2 id="{e(sec["id"])}">{e(sec["title"])}</h2>', f"<p class=\"doc\">{e(sec['doc'])}</p>",
                  f'<table class="rows" data-section="{e(sec["id"])}"><tr><th>Requirement</th><th>Level</th>'
                  f"<th>Capability</th>{head}</tr>"]
        for r in (r for r in matrix["rows"] if r["section"] == sec["id"]):
            cells = []
            for lbl in labels:
                cell = r["cells"][lbl]
                tip = cell["message"] or cell["measured"] or cell["status"]
                cells.append(f'<td class="cell {_CLASS[cell["status"]]}" data-status="{e(cell["status"])}" '
                             f'title="{e(tip)}">{e(cell["status"])}</td>')
            parts.append(f'<tr data-row="{e(r["id"])}"><td><code>{e(r["id"])}</code><br>'
                         f'<span class="doc">{e(r["doc"])}</span></td><td>{e(r["level"])}</td>'
                         f"<td>{e(r['capability'] or '-')}</td>{''.join(cells)}</tr>")
        parts.append("</table>")
    parts += ['<h2 id="capabilities">Declared against measured capabilities</h2>',
              f'<table id="capabilities-table"><tr><th>Capability</th>{head}</tr>']
    for cap in matrix["capabilities"]:
        cells = []
        for lbl in labels:
            cell = cap["cells"][lbl]
            cls = "mismatch " if cell["mismatch"] else ""
            cls += {"+": "pass", "-": "fail", "!": "skip", "N/A": "na"}[cell["verdict"]]
            counts = f" {cell['rows_passed']}/{cell['rows_total']}" if cell["rows_total"] else ""
            cells.append(f'<td class="cell {cls}" title="{e(cell["note"])}">{e(cell["verdict"])}{counts}</td>')
        parts.append(f'<tr><td><code>{e(cap["capability"])}</code><br><span class="doc">{e(cap["doc"])}</span></td>'
                     f"{''.join(cells)}</tr>")
    parts += ["</table>", '<h2 id="notes">Notes</h2>']
    for c in cols:
        items = []
        for r in matrix["rows"]:
            cell = r["cells"][c["label"]]
            if cell["status"] != Status.PASS.value and cell["message"]:
                items.append(f"<li><code>{e(r['id'])}</code> <b>{e(cell['status'])}</b>: {e(cell['message'])}</li>")
            elif cell["measured"]:
                items.append(f"<li><code>{e(r['id'])}</code> measured: {e(cell['measured'])}</li>")
        if items:
            parts.append(f"<details open><summary>{e(c['label'])}</summary><ul>{''.join(items)}</ul></details>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
