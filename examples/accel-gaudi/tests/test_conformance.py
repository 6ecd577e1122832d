"""The conformance suite of the gaudi backend: the three-line form, once per shipped scenario.

Each class adopts the plugin's own scenario of that name (its oracle included) through the
``accel.backends`` entry point, so the oracle rows run here exactly as in ``--accel-backend``.
"""

from accel.conformance import ConformanceSuite


class TestGaudiHl225(ConformanceSuite):
    backend = "gaudi"
    options = {"scenario": "hl225-8"}


class TestGaudiHl325l(ConformanceSuite):
    backend = "gaudi"
    options = {"scenario": "hl325l-8"}
