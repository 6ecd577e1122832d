"""The replicas behind the router: address, role, health, circuit breaker, load and cache view.

:class:`BackendSet` is the set every part of a router reads (the picker, the monitor, the live
load, the metrics): fixed (``--backend``) or changed while the router runs (``--from-serve``:
replicas come and go as ``accel serve`` scales a serving group).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, overload

from ._kvevents import BlockMap, KVSubscriber
from ._scrape import EngineLoad

__all__ = ["Backend", "BackendSet", "CircuitBreaker", "Role"]

#: A replica's part in serving a request.  Only "both" is served today; "prefill" and "decode" are
#: the seam for prefill / decode disaggregation (a router would send the prompt to a prefill
#: replica and the generation to a decode one).
Role = Literal["both", "prefill", "decode"]


@dataclass
class CircuitBreaker:
    """Closed -> open after ``failure_threshold`` consecutive failures; open for ``open_s``; then
    half-open: one trial request, whose success closes it and whose failure opens it again."""

    failure_threshold: int = 3
    open_s: float = 5.0
    failures: int = 0
    opened_at: float | None = None
    trial: bool = False
    opened_total: int = 0

    def state(self, now: float | None = None) -> str:
        if self.opened_at is None:
            return "closed"
        now = time.monotonic() if now is None else now
        return "open" if now - self.opened_at < self.open_s else "half-open"

    def available(self, now: float) -> bool:
        """Whether a request may go to the replica now (no change of state)."""
        st = self.state(now)
        return st == "closed" or (st == "half-open" and not self.trial)

    def begin(self, now: float) -> None:
        """A request was sent: in half-open state it is the one trial."""
        if self.state(now) == "half-open":
            self.trial = True

    def cancel(self) -> None:
        """A request sent ended with no verdict on the replica (the router's own fault: its loop ran
        late): a half-open trial is given back, the failure count stays as it was."""
        self.trial = False

    def success(self) -> None:
        self.failures = 0
        self.opened_at = None
        self.trial = False

    def failure(self, now: float) -> None:
        self.failures += 1
        half_open = self.opened_at is not None
        self.trial = False
        if half_open or self.failures >= self.failure_threshold:
            if self.opened_at is None or half_open:
                self.opened_total += 1
            self.opened_at = now


@dataclass
class Backend:
    """One engine replica (an OpenAI-compatible server)."""

    id: int
    url: str
    role: Role = "both"
    #: Health from the active checks: starts healthy so the first requests need not wait for a check
    #: (a refused connection is retried elsewhere and counts against the breaker).
    healthy: bool = True
    health_failures: int = 0
    last_health_error: str | None = None
    in_flight: int = 0
    breaker: CircuitBreaker = field(default_factory=CircuitBreaker)
    load: EngineLoad | None = None
    scraped_at: float | None = None
    scrape_error: str | None = None
    models: tuple[str, ...] = ()
    block_map: BlockMap | None = None
    kv_endpoint: str | None = None
    kv: KVSubscriber | None = None

    def available(self, now: float) -> bool:
        return self.healthy and self.breaker.available(now)

    def outstanding(self) -> int:
        """Requests the replica holds: the router's own in flight, or the engine's running +
        waiting from its last scrape when more (traffic from elsewhere)."""
        engine = self.load.outstanding if self.load is not None else None
        return max(self.in_flight, round(engine)) if engine is not None else self.in_flight


class BackendSet(Sequence[Backend]):
    """The router's replicas, readable from any thread while they change.

    Readers iterate a snapshot (a tuple replaced whole on each change: a reader sees the set
    before a change or after it, never half of one).  Ids are never reused, so a replica that
    leaves and comes back at the same address starts with a fresh cache view and breaker.
    ``on_removed`` runs for each replica that leaves (the policy forgets its state); requests
    already sent to it finish (they hold the :class:`Backend`).
    """

    def __init__(self, backends: Iterable[Backend] = (), *, breaker: CircuitBreaker | None = None,
                 on_removed: Callable[[Backend], None] | None = None) -> None:
        self._items: tuple[Backend, ...] = tuple(backends)
        self._by_id = {b.id: b for b in self._items}
        if len(self._by_id) != len(self._items):
            raise ValueError("BackendSet: two replicas with one id")
        self._next_id = max(self._by_id, default=-1) + 1
        self._breaker = breaker or CircuitBreaker()
        self._lock = threading.Lock()
        self.on_removed = on_removed
        #: Bumped on every change (readers that cache something per set compare it).
        self.version = 0

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, i: int) -> Backend: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[Backend]: ...

    def __getitem__(self, i: int | slice) -> Backend | Sequence[Backend]:
        return self._items[i]

    def __iter__(self) -> Iterator[Backend]:
        return iter(self._items)

    def by_id(self, backend_id: int) -> Backend | None:
        return self._by_id.get(backend_id)

    def urls(self) -> list[str]:
        return [b.url for b in self._items]

    def sync(self, wanted: Mapping[str, Role], *, healthy: bool = True) -> tuple[list[Backend], list[Backend]]:
        """Make the set hold exactly the replicas ``wanted`` (URL -> role): new URLs are added
        (``healthy``: routable at once, as the source says they serve), missing ones removed.
        Returns (added, removed)."""
        with self._lock:
            keep = [b for b in self._items if b.url in wanted and b.role == wanted[b.url]]
            removed = [b for b in self._items if b not in keep]
            have = {b.url for b in keep}
            added = []
            for url, role in wanted.items():
                if url in have:
                    continue
                b = Backend(self._next_id, url, role=role, healthy=healthy,
                            breaker=CircuitBreaker(self._breaker.failure_threshold, self._breaker.open_s))
                self._next_id += 1
                added.append(b)
            if not added and not removed:
                return [], []
            items = (*keep, *added)
            self._by_id = {b.id: b for b in items}
            self._items = items
            self.version += 1
        if self.on_removed is not None:
            for b in removed:
                self.on_removed(b)
        return added, removed
