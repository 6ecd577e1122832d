"""Co-location: one autoscaled serving load and a backlog of Philly training jobs on one cluster.

The Azure conversation load of ``autoscale.py`` (x4, objective TTFT 2 s / TPOT 100 ms, the
predictive policy with the parameters tuned there) runs through :class:`ServingBridge` on a
fixed cluster of 24 hosts x 8 H100 (192 devices) shared with a backlog of training jobs: the
first Philly jobs of VC ``6214e9`` (``accel.scheduler.queueing.load_philly``; jobs of at most 32
GPUs, durations as in the trace), all queued at time 0 in a lower, preemptible class.  Serving's
class may preempt training; a victim keeps its devices for a 30 s grace period and restarts
from its last checkpoint (every 300 s of run time: the trace has no checkpoint data, this is
an assumption).  The predictive policy's lead is start-up + sync + grace, since a replica asked
for now may wait for a grace period before it is placed.

Reported for the hour (one run each, same trace):

- serving alone on the same cluster (no training): attainment, device-seconds;
- serving with training: attainment, device-seconds, the longest wait of a replica job for
  placement, preemptions;
- training device-hours delivered (work kept x devices: work lost to preemption is not counted,
  the work of jobs still running at the end is) against the device-hours serving left idle
  (cluster device-hours minus those replicas held).  Goal: >= 80%.

Writes ``colocate.csv`` under ``--out``.  ``--quick`` (CI): Azure x1, 30 minutes, 8 hosts.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from accel.scheduler.queueing import (
    Policy,
    PreemptMode,
    PriorityClass,
    QueueingScheduler,
    TraceJob,
    load_philly,
    uniform_cluster,
)
from accel.scheduler.serving import (
    Service,
    ServingBridge,
    decode_weight,
    load_catalog,
    measure_capacities,
    oracle_plan,
)

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import autoscale as az  # noqa: E402  (the sibling benchmark: same cases, loads and tuned parameters)

GRACE_S = 30.0
CHECKPOINT_S = 300.0
VC = "6214e9"


def philly_path() -> Path:
    for base in (az.ROOT.parent / "shared", az.ROOT / "shared", Path("/work/shared")):
        p = base / "traces" / "philly" / f"trace_{VC}.csv"
        if p.is_file():
            return p
    return az.ROOT.parent / "shared" / "traces" / "philly" / f"trace_{VC}.csv"


def backlog(limit: int, max_devices: int, *, whole_hosts: bool = False) -> list[TraceJob]:
    """The first ``limit`` jobs of the VC with at most ``max_devices`` GPUs (``whole_hosts``:
    only jobs of a multiple of 8 GPUs), queued at time 0 in the training class."""
    jobs = [j for j in load_philly(philly_path(), limit=None if whole_hosts else limit * 2)
            if j.devices <= max_devices and (not whole_hosts or j.devices % 8 == 0)][:limit]
    return [TraceJob(j.id, 0.0, j.devices, j.duration_s, tenant=j.tenant, priority_class="training",
                     checkpoint_interval_s=CHECKPOINT_S) for j in jobs]


def engine(hosts: int) -> QueueingScheduler:
    policy = Policy(classes=(PriorityClass("serving", 10, preempts=True, preemptible=False),
                             PriorityClass("training", 0)),
                    grace_s=GRACE_S, preempt_mode=PreemptMode.CHECKPOINT)
    return QueueingScheduler(uniform_cluster(hosts, 8, model="H100", memory_bytes=80 * 10**9), policy)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(HERE / "results"))
    ap.add_argument("--quick", action="store_true", help="Azure x1, 30 minutes, 8 hosts (CI)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    case = az.CASES["azure-quick" if args.quick else "azure"]
    hosts = 8 if args.quick else az.HOSTS
    reqs = az.load(case)
    svc = Service("chat", "llama-2-70b", "h100-80gb", case.objective, min_replicas=1, max_replicas=hosts,
                  pool="H100")
    spec = svc.replica_spec(load_catalog())
    weight = decode_weight(spec.profile)
    mk_router = az.router_for(case, spec)
    sample = [r for r in reqs if r.arrival_s < case.tune_end_s]
    cap = measure_capacities(sample, spec, mk_router, case.objective, weight, replicas=case.cap_replicas,
                             target=case.cap_target, iterations=6)
    plan = oracle_plan(reqs, cap, weight, spec, bin_s=60.0, min_replicas=1, max_replicas=hosts, end_s=case.end_s)
    lead = spec.startup_s + az.SYNC_S + GRACE_S
    n_jobs = 60 if args.quick else 400
    mixed = backlog(n_jobs, 32)
    whole = backlog(n_jobs // 4, 32, whole_hosts=True)
    rows: list[dict[str, object]] = []
    until = case.end_s
    for label, training in (("serving alone", []), ("serving + training (all sizes)", mixed),
                            ("serving + training (whole hosts)", whole)):
        eng = engine(hosts)
        pol = az.predictive(case, cap, weight, lead)  # the autoscaling benchmark's tuned policy
        br = ServingBridge(eng, svc, pol, reqs, mk_router(), initial=plan.initial, training=training)
        res = br.run(until)
        eng.check_invariants()
        serve_ds = res.serving_device_seconds()
        idle = res.idle_left_by_serving_s()
        rows.append({
            "run": label, "hosts": hosts, "training_jobs": len(training),
            "attainment": round(az.attainment(res.serving, case.objective, 0.0, until), 4),
            "serving_device_h": round(serve_ds / 3600, 2),
            "idle_left_by_serving_device_h": round(idle / 3600, 2),
            "training_device_h": round(res.training_device_s / 3600, 2),
            "training_share_of_idle": round(res.training_device_s / idle, 4) if training else "",
            "training_lost_device_h": round(res.training_lost_device_s / 3600, 2),
            "training_finished": res.training_finished, "preemptions": res.preemptions,
            "max_replica_wait_s": round(res.max_placement_wait_s, 1),
            "replica_jobs_never_placed": sum(1 for r in res.replicas if r.placed_s is None),
            "scale_ups": res.scale_ups, "scale_downs": res.scale_downs,
        })
    for r in rows:
        print(", ".join(f"{k} {v}" for k, v in r.items()))
    for both in rows[1:]:
        share = float(str(both["training_share_of_idle"]))
        att = float(str(both["attainment"]))
        print(f"{both['run']}: training >= 80% of the idle device-hours {'Y' if share >= 0.8 else 'n'} "
              f"({share:.1%}); serving objective kept (>= 99%) {'Y' if att >= 0.99 else 'n'} ({att:.2%}; "
              f"alone {float(str(rows[0]['attainment'])):.2%})")
    az.write(rows, out / "colocate.csv")
    print(f"\nwrote {out} in {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
