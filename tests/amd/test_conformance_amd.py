"""The conformance kit over every AMD fake scenario that opens (driver-not-live cannot)."""

import pytest

_kit = pytest.importorskip("accel.conformance")
if not hasattr(_kit, "ConformanceSuite"):  # the kit is still landing
    pytest.skip("accel.conformance has no ConformanceSuite yet", allow_module_level=True)
ConformanceSuite = _kit.ConformanceSuite

# amdsmi is an in-process library read field by field: a cold inventory() of 8 MI300X is about
# 8 x 50 amdsmi calls + 8 x 12 pyrsmi calls + 28 link queries (~530); in CPX mode every one of
# the 64 partition handles is read (~3.5k).  Each call is microseconds, not a process start; the
# kit's default budget (64) is sized for CLI tools.
AMDSMI_BUDGET = 800
AMDSMI_CPX_BUDGET = 4000


class TestAmdMI300X8(ConformanceSuite):
    backend = "amd"
    snapshot_budget = AMDSMI_BUDGET
    options = {"scenario": "mi300x-8"}


class TestAmdMI300X8Cpx(ConformanceSuite):
    backend = "amd"
    snapshot_budget = AMDSMI_CPX_BUDGET
    options = {"scenario": "mi300x-8-cpx"}


class TestAmdAmdsmiAbsent(ConformanceSuite):
    backend = "amd"
    snapshot_budget = AMDSMI_BUDGET
    options = {"scenario": "amdsmi-absent"}


class TestAmdRasUncorrectable(ConformanceSuite):
    backend = "amd"
    snapshot_budget = AMDSMI_BUDGET
    options = {"scenario": "ras-uncorrectable"}


class TestAmdBadPages(ConformanceSuite):
    backend = "amd"
    snapshot_budget = AMDSMI_BUDGET
    options = {"scenario": "bad-pages"}


class TestAmdRadeon(ConformanceSuite):
    backend = "amd"
    snapshot_budget = AMDSMI_BUDGET
    options = {"scenario": "radeon-rx7800xt"}
