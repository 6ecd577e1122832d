"""The conformance kit over every scenario `accel.plugins.amd.conformance` registers."""

from accel.conformance import scenarios_for, suite_for

for _name in scenarios_for("amd"):
    _suite = suite_for("amd", _name)
    globals()[_suite.__name__] = _suite
del _name, _suite
