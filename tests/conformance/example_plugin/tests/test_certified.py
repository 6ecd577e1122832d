"""The full scenario (oracle and recorded faults) from the plugin's CONFORMANCE_SCENARIOS."""

from accel.conformance import suite_for

TestExampleTwoGpu = suite_for("example", "two-gpu")
