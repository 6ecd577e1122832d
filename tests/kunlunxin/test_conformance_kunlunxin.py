"""The conformance kit over every shipped kunlunxin replay scenario (xfails: accel.plugins.kunlunxin.conformance)."""

import pytest

from accel.conformance import scenarios_for, suite_for

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestRemovedIn10Warning")

for _name in scenarios_for("kunlunxin"):
    _suite = suite_for("kunlunxin", _name)
    globals()[_suite.__name__] = _suite
