"""The conformance kit over every scenario `accel.plugins.cambricon.conformance` registers."""

from accel.conformance import scenarios_for, suite_for

for _name in scenarios_for("cambricon"):
    _suite = suite_for("cambricon", _name)
    globals()[_suite.__name__] = _suite
del _name, _suite
