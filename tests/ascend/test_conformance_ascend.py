"""The conformance kit over every scenario `accel.plugins.ascend.conformance` registers."""

from accel.conformance import scenarios_for, suite_for

for _name in scenarios_for("ascend"):
    _suite = suite_for("ascend", _name)
    globals()[_suite.__name__] = _suite
del _name, _suite
