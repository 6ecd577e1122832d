"""The conformance kit over every shipped iluvatar replay scenario (xfails: accel.plugins.iluvatar.conformance)."""

import pytest

from accel.conformance import scenarios_for, suite_for

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestRemovedIn10Warning")

for _name in scenarios_for("iluvatar"):
    _suite = suite_for("iluvatar", _name)
    globals()[_suite.__name__] = _suite
