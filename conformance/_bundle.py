"""Write a run directory: results, log, matrix, and in certify mode the submission bundle.

Layout (certify mode adds the last three, after ``sonobuoy --mode=certified-conformance`` and
the CNCF submission instructions)::

    results.json   the plugin's own records (input of 'accel conformance report')
    junit.xml      pytest's JUnit XML, with the same facts as <property> elements
    run.log        one line per row: status, row, run, node id, duration, message
    matrix.md / matrix.json / matrix.html
    PRODUCT.json   vendor, plugin name and version, driver versions, accel and plugin API versions
    certification.json   passed + the violations
    README.md      how to reproduce the run
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from ._matrix import build_matrix, render_html, render_json, render_markdown

__all__ = ["write_matrix", "write_run_dir"]


def _write(path: Path, text: str) -> None:
    # Write next to the target and rename, so a reader never sees half a file.
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def write_matrix(out: Path, docs: list[dict[str, Any]]) -> dict[str, Path]:
    """Write matrix.md, matrix.json and matrix.html for ``docs`` into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    matrix = build_matrix(docs)
    paths = {"md": out / "matrix.md", "json": out / "matrix.json", "html": out / "matrix.html"}
    _write(paths["md"], render_markdown(matrix))
    _write(paths["json"], render_json(matrix))
    _write(paths["html"], render_html(matrix))
    return paths


def _run_log(doc: dict[str, Any]) -> str:
    lines = [f"# accel conformance run on {doc.get('host')} at {doc.get('started_at')} "
             f"(accel {doc.get('accel_version')}, pytest {doc.get('pytest_version')}, python {doc.get('python')})"]
    for run in doc["runs"]:
        lines.append(f"## {run['label']} ({run.get('key')})")
        if run.get("load_error"):
            lines.append(f"LOAD ERROR {run['load_error']}")
        for rid, r in run["rows"].items():
            extra = f" [{r['measured']}]" if r.get("measured") else ""
            lines.append(f"{r['status'].upper():<10} {rid:<40} {r['duration_s']:.3f}s {r['nodeid']}{extra}")
            if r.get("message"):
                lines.append(f"           {r['message']}")
    cert = doc.get("certification")
    if cert is not None:
        lines.append("CERTIFICATION " + ("PASSED" if cert["passed"] else "FAILED"))
        lines.extend(f"  {v}" for v in cert["violations"])
    return "\n".join(lines) + "\n"


def product(doc: dict[str, Any]) -> dict[str, Any]:
    """The PRODUCT file: what was certified (one entry per run of the session)."""
    entries = []
    for run in doc["runs"]:
        plugin = run.get("plugin") or {}
        entries.append({
            "run": run["label"],
            "vendor": plugin.get("vendor"),
            "plugin_name": plugin.get("name"),
            "plugin_version": plugin.get("version"),
            "distribution": plugin.get("distribution"),
            "driver_versions": run.get("driver_versions", []),
            "plugin_api_version": plugin.get("api_version_negotiated"),
            "device_models": run.get("models", []),
            "device_count": run.get("device_count"),
            "scenario": run.get("scenario"),
        })
    return {"accel_version": doc.get("accel_version"), "host": doc.get("host"), "certified_at": doc.get("finished_at"),
            "certification": doc.get("certification"), "products": entries}


def _readme(doc: dict[str, Any]) -> str:
    runs = doc["runs"]
    backends = sorted({r.get("backend") or "?" for r in runs})
    cert = doc.get("certification") or {}
    return (
        "# accel conformance certification bundle\n\n"
        f"Result: **{'PASSED' if cert.get('passed') else 'FAILED'}** for {', '.join(r['label'] for r in runs)}.\n\n"
        "Files: `results.json` (recorded outcomes), `junit.xml`, `run.log`, `matrix.md/json/html`, `PRODUCT.json`, "
        "`certification.json`, `suite/` (the generated test module, when run with --accel-backend).\n\n"
        "## Reproduce\n\n"
        "```\n"
        + "".join(f"accel conformance run --backend {b} --certify --report <dir>\n" for b in backends)
        + "# or, without the accel CLI:\n"
        + "".join(f"{Path(sys.executable).name} -m pytest --accel-backend {b} --accel-certify --accel-report <dir>\n"
                  for b in backends)
        + "```\n\nIn certify mode every required row must pass (or be N/A because its capability is not "
        "declared); a skipped, overridden or xfailed required row fails the run.\n"
    )


def write_run_dir(out: Path, doc: dict[str, Any], *, certify: bool) -> None:
    """Write everything a run leaves behind into ``out`` (junit.xml is pytest's own)."""
    out.mkdir(parents=True, exist_ok=True)
    _write(out / "results.json", json.dumps(doc, indent=2) + "\n")
    _write(out / "run.log", _run_log(doc))
    write_matrix(out, [doc])
    if certify:
        _write(out / "PRODUCT.json", json.dumps(product(doc), indent=2) + "\n")
        _write(out / "certification.json", json.dumps(doc.get("certification"), indent=2) + "\n")
        _write(out / "README.md", _readme(doc))
