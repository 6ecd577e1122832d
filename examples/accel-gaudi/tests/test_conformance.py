"""The three-line conformance suite of the gaudi backend, plus the oracle rows per scenario."""

from accel.conformance import ConformanceSuite, suite_for


class TestGaudi(ConformanceSuite):
    backend = "gaudi"
    options = {"scenario": "hl225-8"}


# The three-line form above does not pick up the plugin's oracle yet; suite_for() does.
TestGaudiHl225 = suite_for("gaudi", "hl225-8")
TestGaudiHl325l = suite_for("gaudi", "hl325l-8")
