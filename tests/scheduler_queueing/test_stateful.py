"""Stateful property test: random submissions, completions, failures, device faults and
preemptions, with and without attained-service tiers; after every step no device is
over-allocated, no tenant is above its limit, gangs hold all or nothing, no reservation is
delayed by a backfilled job, and metering balances with the journal's run segments."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from accel.scheduler import InvalidRequestError, Share
from accel.scheduler.queueing import (
    BackfillMode,
    InClassOrder,
    JobSpec,
    JobState,
    Policy,
    PreemptMode,
    PriorityClass,
    QueueingScheduler,
    Quota,
    Tenant,
)

from .conftest import GIB, cluster

CLASSES = (PriorityClass("prod", 10, InClassOrder.FIFO, preempts=True),
           PriorityClass("batch", 5, InClassOrder.SHORTEST, band_ratio=2.0),
           PriorityClass("scavenger", 0, InClassOrder.FAIR))
TENANTS = (Tenant("a", guaranteed={"A100": Quota(devices=6)}, limit={"A100": Quota(devices=12)}, cohort="c"),
           Tenant("b", guaranteed={"A100": Quota(devices=6)}, cohort="c", max_running_jobs=4),
           Tenant("c", limit={"*": Quota(devices=10, compute_milli=10_000)}))


class QueueMachine(RuleBasedStateMachine):
    @initialize(mode=st.sampled_from(list(BackfillMode)), preempt=st.sampled_from(list(PreemptMode)),
                grace=st.sampled_from([0.0, 30.0]), two_pools=st.booleans(),
                tiers=st.sampled_from([(), (300.0,), (200.0, 2000.0)]), overhead=st.sampled_from([0.0, 20.0]))
    def setup(self, mode: BackfillMode, preempt: PreemptMode, grace: float, two_pools: bool,
              tiers: tuple[float, ...], overhead: float) -> None:
        c = cluster(pools={"A100": 2, "H100": 1}, per_host=4) if two_pools else cluster(hosts=3, per_host=4)
        pol = Policy(classes=CLASSES, backfill=mode, preempt_mode=preempt, grace_s=grace, default_class="batch",
                     plan_depth=8, demote_after_device_s=tiers, preempt_overhead_s=overhead)
        self.eng = QueueingScheduler(c, pol, tenants=TENANTS)
        self.now = 0.0
        self.n = 0

    @rule(devices=st.integers(1, 9), est=st.sampled_from([30.0, 300.0, 2000.0]),
          klass=st.sampled_from(["prod", "batch", "scavenger"]), tenant=st.sampled_from(["a", "b", "c", "d"]),
          share=st.booleans(), pool=st.sampled_from(["", "A100"]), ckpt=st.sampled_from([None, 100.0]))
    def submit(self, devices: int, est: float, klass: str, tenant: str, share: bool, pool: str,
               ckpt: float | None) -> None:
        self.n += 1
        spec = JobSpec(id=f"j{self.n}", tenant=tenant, devices=1 if share else devices, pool=pool,
                       share=Share(400, 8 * GIB) if share else None, estimate_s=est, priority_class=klass,
                       checkpoint_interval_s=ckpt)
        cap = max(self.eng.pool_capacity(p) for p in ([pool] if pool else self.eng.pools))
        try:
            self.eng.submit(spec, self.now, estimate=self.n % 3 == 0)
        except InvalidRequestError:
            assert spec.devices > cap  # refused only when no pool it accepts is that large

    @rule(dt=st.sampled_from([0.0, 10.0, 40.0, 500.0]))
    def cycle(self, dt: float) -> None:
        self.now += dt
        self.eng.cycle(self.now)
        # the backfill guarantee, checked right after the cycle that booked the reservations
        self.eng.verify_reservations(self.now)

    @precondition(lambda self: bool(self.eng.running()))
    @rule(data=st.data(), ok=st.booleans())
    def complete(self, data: st.DataObject, ok: bool) -> None:
        job = data.draw(st.sampled_from([j for j in self.eng.running() if j.state == JobState.RUNNING] or [None]))
        if job is not None:
            self.eng.finish(job.id, self.now, ok=ok)

    @rule(data=st.data(), usable=st.booleans())
    def device_health(self, data: st.DataObject, usable: bool) -> None:
        ids = [d for host in self.eng.state.dev_ids for d in host]
        self.eng.update_health(self.now, {data.draw(st.sampled_from(ids)): usable})

    @precondition(lambda self: bool(self.eng.queue()))
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        self.eng.cancel(data.draw(st.sampled_from(self.eng.queue())).id, self.now)

    @invariant()
    def consistent(self) -> None:
        if hasattr(self, "eng"):
            self.eng.check_invariants()


EXAMPLES = int(os.environ.get("QUEUE_EXAMPLES", "150"))  # 1,500 for a deeper local hunt
QueueMachine.TestCase.settings = settings(max_examples=EXAMPLES, stateful_step_count=40, deadline=None,
                                          suppress_health_check=[HealthCheck.too_slow])
TestQueueMachine = QueueMachine.TestCase
