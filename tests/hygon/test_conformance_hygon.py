"""The conformance kit over every scenario `accel.plugins.hygon.conformance` registers."""

from accel.conformance import scenarios_for, suite_for

for _name in scenarios_for("hygon"):
    _suite = suite_for("hygon", _name)
    globals()[_suite.__name__] = _suite
del _name, _suite
