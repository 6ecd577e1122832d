"""Per-claim partitions of the DRA kubelet plugin (``--dynamic-partitions``): made on prepare,
destroyed on unprepare, reconciled at start.

The slices publish every placement of every profile of a MIG-mode device (``resource_slices(...,
dynamic=True)``); a claim allocated one is prepared by creating that partition through the
backend's actuator (:func:`accel.plugin.actuator`) at the allocated placement.  Crash safety
comes from the checkpoint's intents (:class:`~._kubelet_state.Pending`):

prepare
    1. record a ``prepare`` intent naming the placements and the parent's live partitions;
    2. create each partition, recording its id in the intent as soon as it is known;
    3. write the CDI spec, then in one checkpoint write the prepared claim in and the intent out.
    A failure at any step destroys what the intent made and drops it (the claim fails).
unprepare
    1. move the claim out of the prepared claims into an ``unprepare`` intent, remove its spec;
    2. destroy each partition (one already gone is fine); 3. drop the intent.
    A partition that is busy keeps the intent (the call fails; the kubelet retries).
restart (:meth:`DynamicPartitions.reconcile`)
    a ``prepare`` intent is rolled back (the kubelet was never told it succeeded and will ask
    again), an ``unprepare`` intent is completed; a prepared claim keeps its partitions.  Only
    partitions the checkpoint owns are destroyed: an id it recorded, or (a crash between a create
    and the write of its id) the partition at exactly the intent's parent, profile and placement
    that was not among the parent's partitions before the create.  Every other partition is never
    touched.

So at every instant the prepared claims name only partitions that exist, and every partition the
plugin made is named by the checkpoint (a prepared claim or an intent that the next start finishes).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from ...errors import AccelError, PartitionBusyError, PartitionNotFoundError
from ...model import Partition
from ...plugin import SupportsPartitionActuation
from ._kubelet_state import ClaimStore, OwnedPartition, Pending

__all__ = ["DynamicPartitions", "Target"]

#: A placement to make: (published device name, parent id, profile, placement start).
Target = tuple[str, str, str, int]


class DynamicPartitions:
    """Creates and destroys the partitions of claims through ``actuator``, recorded in ``store``.

    One lock serialises every create and destroy of this plugin (the hardware serialises them
    anyway; the ``before`` lists of two concurrent intents would otherwise see each other's work).
    """

    def __init__(self, actuator: SupportsPartitionActuation, store: ClaimStore,
                 log: Callable[[str], None]) -> None:
        self.actuator = actuator
        self.store = store
        self._log = log
        self.lock = threading.RLock()

    # -- prepare ------------------------------------------------------------------------------

    def create(self, uid: str, namespace: str, name: str,
               targets: Sequence[Target]) -> tuple[Pending, dict[str, Partition]]:
        """Make every target for claim ``uid`` (steps 1 and 2 of a prepare); returns the intent
        with the ids and the partitions by device name.  On any error what was made is destroyed,
        the intent dropped, and the error raised."""
        with self.lock:
            live = self.actuator.partitions()
            owned = [OwnedPartition(device, parent, profile, start,
                                    before=tuple(sorted(p.id for p in live if p.parent_id == parent)))
                     for device, parent, profile, start in targets]
            intent = Pending("prepare", namespace, name, tuple(owned))
            self.store.set_pending(uid, intent)
            made: dict[str, Partition] = {}
            try:
                for i, target in enumerate(owned):
                    part = self.actuator.create_partition(target.parent_id, target.profile,
                                                          placement_start=target.start)
                    made[target.device] = part
                    owned[i] = OwnedPartition(target.device, target.parent_id, target.profile, target.start,
                                              part.id, target.before)
                    intent = Pending("prepare", namespace, name, tuple(owned))
                    self.store.set_pending(uid, intent)
            except BaseException:
                self.rollback(uid, intent)
                raise
            return intent, made

    def rollback(self, uid: str, intent: Pending) -> list[str]:
        """Destroy what a ``prepare`` intent made and drop it; returns the ids destroyed.  A
        destroy refused (busy) keeps the intent for the next :meth:`reconcile` and is raised."""
        with self.lock:
            destroyed = self._destroy(uid, self._made_by(uid, intent))
            self.store.drop_pending(uid)
            return destroyed

    def _made_by(self, uid: str, intent: Pending) -> list[str]:
        """The partitions an intent made: the ids it recorded, and for a target without one the
        partition at exactly its placement that was not there before (and no one else owns)."""
        ids = [p.partition_id for p in intent.partitions if p.partition_id is not None]
        missing = [p for p in intent.partitions if p.partition_id is None]
        if missing:
            others = self._owned_except(uid)
            for target in missing:
                for part in self.actuator.partitions():
                    if (part.parent_id == target.parent_id and part.profile == target.profile
                            and part.placement is not None and part.placement.start == target.start
                            and part.id not in target.before and part.id not in others and part.id not in ids):
                        ids.append(part.id)
        return ids

    def _owned_except(self, uid: str) -> set[str]:
        out = {p.partition_id for u, c in self.store.claims().items() if u != uid for p in c.partitions}
        out |= {p.partition_id for u, i in self.store.pending().items() if u != uid for p in i.partitions}
        return {i for i in out if i is not None}

    def _destroy(self, uid: str, ids: Sequence[str]) -> list[str]:
        done = []
        for pid in ids:
            try:
                self.actuator.destroy_partition(pid)
                done.append(pid)
            except PartitionNotFoundError:
                pass  # already gone (a destroy that finished before a crash)
        return done

    # -- unprepare ----------------------------------------------------------------------------

    def unprepare(self, uid: str) -> bool:
        """Destroy the partitions of claim ``uid`` (False: it owns none here).  Raises
        :class:`~accel.errors.PartitionBusyError` (intent kept) when one is in use."""
        with self.lock:
            intent = self.store.pending().get(uid)
            if intent is not None and intent.op == "prepare":  # a prepare that never finished
                self.rollback(uid, intent)
                return True
            intent = self.store.begin_unprepare(uid)
            if intent is None:
                return False
            self._destroy(uid, [p.partition_id for p in intent.partitions if p.partition_id is not None])
            self.store.drop_pending(uid)
            return True

    # -- restart ------------------------------------------------------------------------------

    def reconcile(self) -> list[str]:
        """Finish every intent (see the module docstring); returns what was done, one line each.
        An intent whose destroy is refused (busy) stays for the next call."""
        lines: list[str] = []
        with self.lock:
            for uid, intent in sorted(self.store.pending().items()):
                try:
                    if intent.op == "prepare":
                        gone = self.rollback(uid, intent)
                        lines.append(f"claim {intent.namespace}/{intent.name} ({uid}): an unfinished prepare "
                                     f"rolled back; destroyed {', '.join(gone) or 'nothing'}")
                    else:
                        self.unprepare(uid)
                        lines.append(f"claim {intent.namespace}/{intent.name} ({uid}): an unfinished unprepare "
                                     "completed")
                except PartitionBusyError as exc:
                    lines.append(f"claim {intent.namespace}/{intent.name} ({uid}): not finished yet: {exc}")
                except AccelError as exc:
                    lines.append(f"error: claim {intent.namespace}/{intent.name} ({uid}): intent kept: {exc}")
            live = {p.id for p in self.actuator.partitions()}
            for uid, claim in sorted(self.store.claims().items()):
                lost = [p.partition_id for p in claim.partitions if p.partition_id not in live]
                if lost:
                    lines.append(f"warning: claim {claim.namespace}/{claim.name} ({uid}): its partition(s) "
                                 f"{', '.join(str(x) for x in lost)} were destroyed outside this plugin")
        return lines
