"""pytest plugin of the accel conformance kit (inert unless ``--accel-backend`` is given)."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("accel", "accel conformance kit")
    group.addoption("--accel-backend", action="store", default=None, metavar="NAME",
                    help="run the accel conformance suite against the backend NAME")
