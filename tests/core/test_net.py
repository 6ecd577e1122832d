"""accel._net.is_loopback: the check behind the exporter's and the extender's exposure warning."""

from __future__ import annotations

import pytest

from accel._net import is_loopback


@pytest.mark.parametrize("addr", ["localhost", "127.0.0.1", "127.8.9.10", "::1", "[::1]"])
def test_loopback_addresses(addr: str) -> None:
    assert is_loopback(addr)


@pytest.mark.parametrize("addr", ["0.0.0.0", "::", "[::]", "10.0.0.1", "192.168.1.2", "example.org", "", "local host"])
def test_other_addresses_are_not_assumed_local(addr: str) -> None:
    assert not is_loopback(addr)
