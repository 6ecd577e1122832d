"""accel: one typed device model for every AI accelerator vendor.

    >>> import accel
    >>> with accel.open_session(sim="dgx-h100") as session:   # doctest: +SKIP
    ...     inv = session.inventory()
    ...     [d.model for d in inv.devices]

``import accel`` loads no vendor library: backends are found through the ``accel.backends``
entry points and opened only when asked.
"""

from __future__ import annotations

# First: when this process is the `accel` command, a SIGINT from here on exits 130 silently
# (accel/_early.py); everything below loads after that.
from . import _early  # noqa: F401  isort: skip

import logging
from typing import TYPE_CHECKING, Any

from .errors import AccelError

if TYPE_CHECKING:
    from .discovery import DiscoveryReport, Session, discover, open_session

__all__ = ["AccelError", "DiscoveryReport", "Session", "__version__", "discover", "open_session"]
__version__: str

logging.getLogger(__name__).addHandler(logging.NullHandler())



def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("accel-sdk")
    except metadata.PackageNotFoundError:  # running from a source tree
        return "0.0.0+unknown"


def __getattr__(name: str) -> Any:
    # importlib.metadata costs ~30 ms; only pay for it when the version is asked for.
    if name == "__version__":
        version = _version()
        globals()["__version__"] = version
        return version
    # Discovery reads entry-point metadata; load it on first use so ``import accel`` stays cheap.
    if name in {"DiscoveryReport", "Session", "discover", "open_session"}:
        from . import discovery

        return getattr(discovery, name)
    raise AttributeError(f"module 'accel' has no attribute {name!r}")
