"""The conformance kit over every shipped mthreads replay scenario (xfails: accel.plugins.mthreads.conformance)."""

import pytest

from accel.conformance import scenarios_for, suite_for

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestRemovedIn10Warning")

for _name in scenarios_for("mthreads"):
    _suite = suite_for("mthreads", _name)
    globals()[_suite.__name__] = _suite
