"""The conformance kit over every shipped metax replay scenario (xfails: accel.plugins.metax.conformance)."""

import pytest

from accel.conformance import scenarios_for, suite_for

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestRemovedIn10Warning")

for _name in scenarios_for("metax"):
    _suite = suite_for("metax", _name)
    globals()[_suite.__name__] = _suite
