"""What accel's network services share (the exporter, the k8s extender, later `accel serve`): the
loopback check here; bounded JSON decoding in :mod:`.bounded_json`; the HTTP server stack (uvicorn,
with timeouts and limits) in :mod:`.asgi_server`."""

from __future__ import annotations

import ipaddress

__all__ = ["is_loopback"]


def is_loopback(addr: str) -> bool:
    """Whether a listen address (``localhost``, an IPv4 or IPv6 literal, ``[::1]``) is reachable
    only from this host; a name other than ``localhost`` is not assumed to be."""
    if addr == "localhost":
        return True
    try:
        return ipaddress.ip_address(addr.strip("[]")).is_loopback
    except ValueError:
        return False
