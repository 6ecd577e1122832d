"""The accel conformance kit: certify any backend plugin, ours or a vendor's.

A vendor's whole test module (three lines)::

    from accel.conformance import ConformanceSuite

    class TestMyBackend(ConformanceSuite):
        backend = "mybackend"                    # the accel.backends entry-point name
        options = {"scenario": "8-gpu"}          # -> BackendConfig.options

Run it with pytest, or without writing a file::

    pytest --accel-backend mybackend --accel-report out/          # or: accel conformance run --backend ...
    pytest --accel-backend mybackend --accel-certify --accel-report bundle/

Every test is one row of :data:`REQUIREMENTS` (id, section, level, gating capability, one
sentence), kept as data in ``requirements.json``.  Rows gated on an undeclared capability are
*not applicable*; optional inputs are an :class:`Oracle` (independent truth) and fault hooks
(:class:`FaultInjector`, or the suite's ``lose_device``).  Known deviations go in the suite's
``xfail`` mapping and are strict; an overridden suite test is reported as *overridden*.

Results become a matrix (Markdown, JSON, self-contained HTML) via :func:`run`, :func:`report`
and :func:`run_all`.  A plugin package may ship ``<package>.conformance.CONFORMANCE_SCENARIOS``
(:class:`Scenario` per name) so ``python -m accel.conformance.matrix --all`` certifies it on its
recorded scenarios.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._api import RunResult, report, run, run_all
    from ._bundle import write_matrix
    from ._hooks import Fault, FaultInjector, Oracle, ReportsCost, SysfsOracle
    from ._isolation import VENDOR_MODULES
    from ._matrix import build_matrix, render_html, render_json, render_markdown
    from ._records import Status, certification, load_results
    from ._requirements import REQUIREMENTS, SECTIONS, Level, Requirement, Section, requirement
    from ._scenarios import SCENARIOS_ATTR, Scenario, all_scenarios, scenarios_for, suite_for
    from ._suite import NOT_APPLICABLE, ConformanceSuite

# Loaded on first use, like ``accel`` itself: the pytest plugin (pytest_plugin.py) is imported by
# every pytest run of every project that installs accel, and must not pay for the kit.
_LAZY = {
    "RunResult": "._api",
    "report": "._api",
    "run": "._api",
    "run_all": "._api",
    "write_matrix": "._bundle",
    "Fault": "._hooks",
    "FaultInjector": "._hooks",
    "Oracle": "._hooks",
    "ReportsCost": "._hooks",
    "SysfsOracle": "._hooks",
    "VENDOR_MODULES": "._isolation",
    "build_matrix": "._matrix",
    "render_html": "._matrix",
    "render_json": "._matrix",
    "render_markdown": "._matrix",
    "Status": "._records",
    "certification": "._records",
    "load_results": "._records",
    "REQUIREMENTS": "._requirements",
    "SECTIONS": "._requirements",
    "Level": "._requirements",
    "Requirement": "._requirements",
    "Section": "._requirements",
    "requirement": "._requirements",
    "SCENARIOS_ATTR": "._scenarios",
    "Scenario": "._scenarios",
    "all_scenarios": "._scenarios",
    "scenarios_for": "._scenarios",
    "suite_for": "._scenarios",
    "NOT_APPLICABLE": "._suite",
    "ConformanceSuite": "._suite",
}

__all__ = [
    "NOT_APPLICABLE",
    "REQUIREMENTS",
    "SCENARIOS_ATTR",
    "SECTIONS",
    "VENDOR_MODULES",
    "ConformanceSuite",
    "Fault",
    "FaultInjector",
    "Level",
    "Oracle",
    "ReportsCost",
    "Requirement",
    "RunResult",
    "Scenario",
    "Section",
    "Status",
    "SysfsOracle",
    "all_scenarios",
    "build_matrix",
    "certification",
    "load_results",
    "main",
    "render_html",
    "render_json",
    "render_markdown",
    "report",
    "requirement",
    "run",
    "run_all",
    "scenarios_for",
    "suite_for",
    "write_matrix",
]


def main(argv: list[str] | None = None) -> int:
    """``python -m accel.conformance run|report|matrix ...`` (the same as ``accel conformance``)."""
    from ._cli import main as _main

    return _main(argv)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'accel.conformance' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
