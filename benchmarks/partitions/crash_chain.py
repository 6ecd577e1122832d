"""SIGKILL chain over simulated partition creates and destroys: no orphan, no torn state.

A worker process creates and destroys MIG instances (``a100-mig``), AMD modes (``mi300x-8``)
and vNPUs (``ascend-910b-8``) at random over one ``state`` file; it is SIGKILLed at a random
instant, and sometimes by the ``partition_kill`` fault exactly between the two steps of a create
or destroy.  After each kill a fresh backend opens over the file (which reconciles what the
dead process left) and the machine is checked: no intent left, no half-made partition, no two
MIG placements overlapping, no profile over its instance count, at most 7 compute slices per
GPU, AMD partitions only with their mode set and all of them there.

    python benchmarks/partitions/crash_chain.py --rounds 200        # prints rounds, kills, violations

The test suite runs a short chain (tests/partitions/test_crash_chain.py).
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

PROFILES = {"a100-mig": 0, "mi300x-8": 0, "ascend-910b-8": 0}


def worker(profile: str, state: str, seed: int, kill_between: bool) -> None:
    """Create and destroy partitions at random forever (until killed)."""
    from accel.errors import PartitionError
    from accel.plugin import BackendConfig
    from accel.sim import SimPlugin

    rng = random.Random(seed)
    faults = "partition_kill:0" if kill_between else ""
    backend = SimPlugin().open(BackendConfig(options={"profile": profile, "state": state, "faults": faults}))
    dev = backend.inventory().devices[0].id
    names = [p.name for p in backend.partition_profiles() if p.parent_id == dev]
    print("ready", flush=True)
    while True:
        parts = [p for p in backend.partitions() if p.parent_id == dev]
        try:
            if parts and rng.random() < 0.45:
                backend.destroy_partition(rng.choice(parts).id)
            else:
                backend.create_partition(dev, rng.choice(names))
        except PartitionError:
            pass


def violations(profile: str, state: str) -> list[str]:
    """What is wrong with the machine a fresh backend sees over ``state`` (empty: nothing)."""
    import json

    from accel.plugin import BackendConfig
    from accel.sim import SimPlugin

    backend = SimPlugin().open(BackendConfig(options={"profile": profile, "state": state}))
    out: list[str] = []
    raw = json.loads(Path(state).read_text()) if Path(state).exists() else {"intents": []}
    if raw["intents"]:
        out.append(f"{profile}: intents left after reconciling: {raw['intents']}")
    inv = backend.inventory()
    dev = inv.devices[0]
    parts = [p for p in inv.partitions if p.parent_id == dev.id]
    profiles = {p.name: p for p in inv.partition_profiles if p.parent_id == dev.id}
    for p in parts:
        if p.gi_id is not None and p.ci_id is None:
            out.append(f"{profile}: half-made partition {p.id} (GPU instance without compute instance)")
        prof = profiles.get(p.profile)
        if prof is None:
            out.append(f"{profile}: partition {p.id} of unknown profile {p.profile}")
        elif prof.max_instances is not None and sum(q.profile == p.profile for q in parts) > prof.max_instances:
            out.append(f"{profile}: more {p.profile} than {prof.max_instances}")
    placed = [p.placement for p in parts if p.placement is not None and p.gi_id is not None]
    for i, a in enumerate(placed):
        if any(a.overlaps(b) for b in placed[i + 1:]):
            out.append(f"{profile}: overlapping MIG placements")
            break
    if dev.vendor == "nvidia":
        slices = sum(int(p.profile.split("g.")[0]) for p in parts)
        if slices > 7:
            out.append(f"{profile}: {slices} compute slices in use")
    if dev.vendor == "amd":
        mode = dev.partition_mode
        want = profiles[f"{mode.compute_mode}_{mode.memory_mode}"].max_instances if parts else 0
        if mode.compute_mode == "spx" and parts:
            out.append(f"{profile}: partitions without a mode")
        if parts and len(parts) != want:
            out.append(f"{profile}: {len(parts)} partitions in {mode.compute_mode}_{mode.memory_mode}")
    backend.close()
    return out


def kill_round(argv: list[str], env: dict[str, str], *, between: bool, delay_s: float, timeout_s: float) -> int:
    """Start the worker ``argv`` and kill it: with ``between`` the worker kills itself between
    two steps of its operation; otherwise SIGKILL ``delay_s`` after it says ready.  Returns its
    exit status (``-SIGKILL`` when killed).  Shared with ``kubelet_chain.py``."""
    proc = subprocess.Popen(argv + (["--kill-between"] if between else []),
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert proc.stdout is not None
    proc.stdout.readline()  # "ready" (or EOF if it died first)
    if not between:
        time.sleep(delay_s)
        os.kill(proc.pid, signal.SIGKILL)
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    proc.stdout.close()
    return proc.returncode


def chain(rounds: int, workdir: Path, seed: int = 0, max_delay_s: float = 0.3) -> tuple[int, list[str]]:
    """Run ``rounds`` kill rounds; returns (processes killed by SIGKILL, violations)."""
    rng = random.Random(seed)
    killed = 0
    found: list[str] = []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[2]),
                                                         os.environ.get("PYTHONPATH", "")])}
    for r in range(rounds):
        profile = list(PROFILES)[r % len(PROFILES)]
        state = str(workdir / f"{profile}.json")
        between = rng.random() < 0.5
        argv = [sys.executable, __file__, "--worker", profile, "--state", state, "--seed", str(seed * 1000 + r)]
        delay_s = 0.0 if between else rng.uniform(0.0, max_delay_s)  # the draws of the chains before
        code = kill_round(argv, env, between=between, delay_s=delay_s, timeout_s=30)
        killed += code == -signal.SIGKILL
        found += violations(profile, state)
    return killed, found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--state", help=argparse.SUPPRESS)
    ap.add_argument("--kill-between", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.state, args.seed, args.kill_between)
        return 0
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        start = time.monotonic()
        killed, found = chain(args.rounds, Path(tmp), seed=args.seed)
        print(f"rounds {args.rounds}  killed {killed}  violations {len(found)}  ({time.monotonic() - start:.1f} s)")
        for line in found[:20]:
            print(" ", line)
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
