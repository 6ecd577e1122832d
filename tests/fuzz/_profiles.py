"""Hypothesis profiles of the service fuzz tests: ``ci`` (the normal run: small) and ``fuzz``
(``tox -e fuzz``: many examples).  ``ACCEL_FUZZ_PROFILE`` picks one; the tests take it as their
``parent`` settings, so loading it changes no other test's settings."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

__all__ = ["PROFILE"]

settings.register_profile(
    "ci", max_examples=120, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
settings.register_profile(
    "fuzz", max_examples=3000, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])

PROFILE = settings.get_profile(os.environ.get("ACCEL_FUZZ_PROFILE", "ci"))
