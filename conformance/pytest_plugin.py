"""pytest plugin of the accel conformance kit, registered through the ``pytest11`` entry point.

pytest loads every ``pytest11`` plugin in every project, so this module is **inert and light**:
it imports nothing but pytest (``accel`` and ``accel.conformance`` are lazy packages), adds the
kit's options, and loads the kit itself (:mod:`accel.conformance._plugin`) only when a run uses
it.  It activates when

* ``--accel-backend NAME`` is given: it generates the three-line suite module for ``NAME``
  (``--accel-option key=value``, or ``--accel-scenario S`` from the plugin's
  ``CONFORMANCE_SCENARIOS``) and collects it, instead of the project's test paths unless
  paths were named explicitly; or
* ``--accel-report DIR`` is given (results, JUnit XML and the matrix are written there); or
* a collected test class subclasses ``ConformanceSuite`` (which a test module can only do after
  importing the kit, so a project that never imports it never loads it).

For suite items it records the requirement row and outcome of each test, in
``item.user_properties`` (so they land in JUnit XML) and in its own records;
``--accel-certify`` fails the run on any required row that did not pass.  The cost in a project
that does not use the kit is measured by ``benchmarks/pytest_plugin_cost.py``.
"""

from __future__ import annotations

import sys
from collections.abc import Generator
from typing import Any, Final

import pytest

__all__: list[str] = []

#: The kit's module that defines ConformanceSuite: until it is imported no suite class exists.
_SUITE_MODULE: Final = "accel.conformance._suite"
#: The kit's run records: until they are imported no run has anything to report.
_RECORDS_MODULE: Final = "accel.conformance._records"

# Shared with accel.conformance._plugin (defined here so the light hooks can test them).
SUITE_ITEM: Final = pytest.StashKey[str]()
OVERRIDDEN: Final = pytest.StashKey[str]()
DOC: Final = pytest.StashKey[dict[str, Any]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("accel", "accel conformance kit")
    group.addoption("--accel-backend", action="store", default=None, metavar="NAME",
                    help="run the accel conformance suite against the backend NAME (an accel.backends entry point)")
    group.addoption("--accel-option", action="append", default=[], metavar="KEY=VALUE",
                    help="an option for the backend's BackendConfig.options (repeatable)")
    group.addoption("--accel-scenario", action="store", default=None, metavar="NAME",
                    help="use the plugin's CONFORMANCE_SCENARIOS[NAME] as the backend config")
    group.addoption("--accel-report", action="store", default=None, metavar="DIR",
                    help="write results.json, junit.xml, run.log and matrix.{md,json,html} into DIR")
    group.addoption("--accel-certify", action="store_true", default=False,
                    help="certify mode: any required row that did not pass fails the run; writes a bundle")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("accel_backend", None) or config.getoption("accel_report", None):
        from ._plugin import configure

        configure(config)


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    if _SUITE_MODULE not in sys.modules:
        return  # ConformanceSuite was never imported: no collected class can subclass it
    from ._plugin import collection_modifyitems

    collection_modifyitems(session, config, items)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    if SUITE_ITEM not in item.stash:
        return (yield)
    from ._plugin import runtest_makereport

    return (yield from runtest_makereport(item, call))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _RECORDS_MODULE not in sys.modules:
        return  # no suite item was recorded
    from ._plugin import sessionfinish

    sessionfinish(session, exitstatus)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if DOC not in config.stash:
        return
    from ._plugin import terminal_summary

    terminal_summary(terminalreporter, exitstatus, config)
