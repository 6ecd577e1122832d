"""A stand-in for ``accel serve`` driving an executor, to be SIGKILLed at any moment.

``local`` by default; ``CRASH_EXECUTOR=slurm`` (with ``SLURM_CONF``) drives the ``slurm`` executor
on the node of the simulator profile ``mixed-nvidia-ascend``.

It keeps a journal as the service does (a job's handle is written only after ``start``
returned; its outcome once ``poll`` says it ended), and on every (re)start goes on from it:
a job without a journaled handle is started (again: the executor is ``relaunch_safe``), a job
with one is reattached and polled.  It prints ``ALL DONE`` and exits once every job has an
outcome.  Each job appends its id to ``runs.log`` when it runs, so a test can count runs.

    python -m tests.service_exec._crash_service STATE_DIR   (from the repository root)
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from accel.service import Executor, Handle, JobLostError, LaunchSpec
from accel.service.executors._local import LocalExecutor
from accel.service.executors._slurm import SlurmExecutor
from accel.service.executors._sources import node_inventory_source
from accel.service.executors._wrap import write_json_atomic
from tests.service_exec._common import host

#: (job id, seconds it runs, its exit code); CRASH_JOB_SCALE stretches the run times (stress runs).
_SCALE = float(os.environ.get("CRASH_JOB_SCALE", "1"))
JOBS = [(f"j{i}", round(_SCALE * (0.05 + 0.07 * (i % 6)), 3), i % 4) for i in range(10)]


def main(state: Path) -> int:
    ex: Executor
    if os.environ.get("CRASH_EXECUTOR", "local") == "slurm":
        ex = SlurmExecutor(
            state / "executor",
            node_inventory=node_inventory_source("sim:mixed-nvidia-ascend"),
            env={"SLURM_CONF": os.environ["SLURM_CONF"]},
        )
    else:
        inv = host()
        ex = LocalExecutor(state / "executor", inventory=lambda: inv, allow_root=True)
    journal_path = state / "journal.json"
    journal: dict[str, dict[str, object]] = json.loads(journal_path.read_text()) if journal_path.exists() else {}
    runs = state / "runs.log"
    while True:
        for job_id, seconds, code in JOBS:
            entry = journal.setdefault(job_id, {})
            if "outcome" in entry:
                continue
            if "ref" not in entry:
                log_dir = state / "logs" / job_id
                log_dir.mkdir(parents=True, exist_ok=True)
                argv = ("sh", "-c", f"echo {job_id} >> {runs}; sleep {seconds}; exit {code}")
                handle = ex.start(LaunchSpec(job_id=job_id, tenant="t", argv=argv, devices=(), log_dir=log_dir))
                entry["ref"] = handle.ref
            else:
                try:
                    status = ex.reattach(Handle(ex.name, job_id, str(entry["ref"])))
                except JobLostError as exc:
                    entry["outcome"] = {"lost": str(exc)}
                else:
                    if not status.running:
                        entry["outcome"] = {"exit_code": status.exit_code, "reason": str(status.reason)}
            write_json_atomic(journal_path, journal)
        if all("outcome" in journal[j] for j, _, _ in JOBS):
            print("ALL DONE", flush=True)
            return 0
        time.sleep(0.01)


if __name__ == "__main__":
    os.umask(0o022)
    sys.exit(main(Path(sys.argv[1])))
