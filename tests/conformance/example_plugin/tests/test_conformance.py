"""The three-line conformance test of the example backend."""

from accel.conformance import ConformanceSuite


class TestExample(ConformanceSuite):
    backend = "example"
    options = {"scenario": "two-gpu"}
