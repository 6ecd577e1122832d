"""The conformance suite of the ppu backend: the three-line form, over the fake libhgml of the
shipped scenario (adopted with its oracle through the ``accel.backends`` entry point)."""

from accel.conformance import ConformanceSuite


class TestPpu8(ConformanceSuite):
    backend = "ppu"
    options = {"scenario": "ppu-8", "read": "native"}
