"""The conformance kit over every shipped enflame replay scenario (xfails: accel.plugins.enflame.conformance)."""

import pytest

from accel.conformance import scenarios_for, suite_for

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestRemovedIn10Warning")

for _name in scenarios_for("enflame"):
    _suite = suite_for("enflame", _name)
    globals()[_suite.__name__] = _suite
