"""The replicas behind the router: address, role, health, circuit breaker, load and cache view."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal

from ._kvevents import BlockMap, KVSubscriber
from ._scrape import EngineLoad

__all__ = ["Backend", "CircuitBreaker", "Role"]

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
