"""Replay fault injection: what the conformance kit's ``FaultInjector`` asks a CLI backend to
simulate over a recorded host (a device that falls off the bus, health that cannot be read).

Only a replay may simulate faults, never the real tool: :class:`ReplayFaults` refuses otherwise.
The simulation edits what the tool printed, so the backend's lost-device detection
(:class:`~accel.toolkit.CliBackend`) runs on it exactly as it would on a real host.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from accel.errors import NotSupportedError
from accel.model import Device, Domain, Health, Partition

if TYPE_CHECKING:
    from ._snapshot import Snapshot

__all__ = ["ReplayFaults", "with_health"]

#: The faults :class:`ReplayFaults` simulates (the values of ``accel.conformance.Fault``).
_DEVICE_LOST = "device_lost"
_HEALTH_NOT_SUPPORTED = "health_not_supported"


def with_health(dev: Device, health: Health) -> Device:
    """``dev`` with ``health``, through the constructor so the new health is validated
    (``model_copy`` would not validate)."""
    return Device.model_validate({**dict(dev), "health": health})


class ReplayFaults:
    """The faults injected into one backend's replay, by device id."""

    def __init__(self, name: str, *, replay: bool) -> None:
        self._name = name
        self._replay = replay
        self._faults: dict[str, str] = {}

    def check(self, fault: object, device_id: str) -> str:
        """The fault's kind; :class:`~accel.errors.NotSupportedError` over a real tool or for a
        fault this backend cannot simulate."""
        kind = str(getattr(fault, "value", fault))
        if not self._replay:
            raise NotSupportedError(
                f"{self._name}: fault injection needs a replay (--replay DIR or option 'scenario')",
                device_id=device_id,
            )
        if kind not in (_DEVICE_LOST, _HEALTH_NOT_SUPPORTED):
            raise NotSupportedError(f"{self._name}: unknown fault {kind!r}", device_id=device_id)
        return kind

    def add(self, device_id: str, kind: str) -> None:
        """Simulate ``kind`` (checked by :meth:`check`) on ``device_id`` from now on."""
        self._faults[device_id] = kind

    def apply(self, snap: Snapshot) -> Snapshot:
        """``snap`` as the tool would print it with the injected faults.

        ``device_lost``: the device, its partitions and everything naming them (telemetry,
        profiles, links, domain membership, processes) are dropped.  ``health_not_supported``:
        the device's and its partitions' health is ``Health(monitored=False)``.
        """
        if not self._faults:
            return snap
        dropped = {i for i, k in self._faults.items() if k == _DEVICE_LOST}
        unread = {i for i, k in self._faults.items() if k == _HEALTH_NOT_SUPPORTED}
        parts = {p.id for p in snap.partitions if p.parent_id in dropped}
        gone = dropped | parts
        unknown = Health(monitored=False)
        domains = []
        for dom in snap.domains:
            members = tuple(m for m in dom.members if m not in gone)
            if members == dom.members:
                domains.append(dom)
            elif members:
                domains.append(Domain.model_validate({**dict(dom), "members": members}))
        return dataclasses.replace(
            snap,
            devices=tuple(
                with_health(d, unknown) if d.id in unread else d for d in snap.devices if d.id not in dropped
            ),
            telemetry=tuple(t for t in snap.telemetry if t.device_id not in gone),
            partitions=tuple(
                Partition.model_validate({**dict(p), "health": unknown}) if p.parent_id in unread else p
                for p in snap.partitions
                if p.id not in parts
            ),
            profiles=tuple(p for p in snap.profiles if p.parent_id not in dropped),
            links=tuple(link for link in snap.links if link.a not in gone and link.b not in gone),
            domains=tuple(domains),
            processes=tuple(
                p for p in snap.processes if p.device_id not in gone and p.partition_id not in gone
            ),
        )
