"""Helpers for testing backends without hardware: a fake sysfs tree builder.

Plugin authors use these in their own tests; nothing here is imported by ``import accel``.
"""

from ._sysfs import FakeSysfs

__all__ = ["FakeSysfs"]
