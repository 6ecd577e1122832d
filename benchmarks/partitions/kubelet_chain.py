"""SIGKILL chain over the DRA kubelet plugin's dynamic partitions: no orphan, no claim on a destroyed one.

A worker process runs :class:`~accel.integrations.k8s.KubeletPlugin` with ``--dynamic-partitions``
over the simulator (``a100-mig`` with a ``state`` file, so partitions outlive the process) and an
"API server" kept in a file (claims survive the kill as they survive a plugin restart in a
cluster).  It allocates placements the way the scheduler's allocator does (each device once,
shared counters never overdrawn, over the slices the plugin publishes), writes the claim, calls
prepare; or unprepares a claim and then deletes it.  It is SIGKILLed at a random instant, or by
the simulator's ``partition_kill`` fault exactly between the two steps of its first create or
destroy.  Two of the profile's own MIG instances are left in place: the plugin does not own them
and must never touch them.

After each kill a fresh plugin starts over the same directories (which reconciles) and the node
is checked: no intent left (plugin or simulator), the two foreign instances intact, every live
partition owned by exactly one prepared claim (no orphan), every prepared claim's partitions
live with its CDI spec naming them (no claim on a destroyed partition), every prepared claim
still allocated in the API, no CDI spec without its claim, and the API's allocations within the
published counters (no double allocation).

    python benchmarks/partitions/kubelet_chain.py --rounds 100     # prints rounds, kills, creates, violations

The test suite runs a short chain (tests/k8s_kubelet/test_dynamic_chain.py).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from accel.integrations.k8s.testing import DraPoolModel

sys.path.insert(0, str(Path(__file__).resolve().parent))
from crash_chain import kill_round

PROFILE = "a100-mig"
DRIVER = "nvidia.accel.dev"
NODE = "node-1"
#: The profile's own instances the chain destroys at setup (the other two stay, foreign to the plugin).
CLEARED = ("3g.40gb", "2g.20gb")


class FileApi:
    """The plugin's Kubernetes API over a JSON file of claims (slices are kept in memory)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.slices: dict[str, dict[str, Any]] = {}

    def claims(self) -> dict[str, dict[str, Any]]:
        if not self.path.exists():
            return {}
        data: dict[str, dict[str, Any]] = json.loads(self.path.read_text())
        return data

    def _write(self, claims: dict[str, dict[str, Any]]) -> None:
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".api.")
        with os.fdopen(fd, "w") as fh:
            json.dump(claims, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)

    def add_claim(self, name: str, devices: list[str]) -> str:
        uid = str(uuid.uuid4())
        results = [{"request": "gpu", "driver": DRIVER, "pool": NODE, "device": d} for d in devices]
        claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                 "metadata": {"name": name, "namespace": "default", "uid": uid},
                 "status": {"allocation": {"devices": {"results": results}}}}
        self._write({**self.claims(), name: claim})
        return uid

    def delete_claim(self, name: str) -> None:
        self._write({k: v for k, v in self.claims().items() if k != name})

    # -- the KubeApi protocol ------------------------------------------------------------------
    def read_claim(self, namespace: str, name: str) -> dict[str, Any]:
        from accel.integrations.k8s._kubeapi import KubeApiError

        claim = self.claims().get(name)
        if claim is None:
            raise KubeApiError(f"resourceclaims {name!r} not found", status=404)
        return claim

    def read_node(self, name: str) -> dict[str, Any]:
        from accel.integrations.k8s._kubeapi import KubeApiError

        raise KubeApiError(f"nodes {name!r} not found", status=404)

    def list_slices(self, driver: str, node: str) -> list[dict[str, Any]]:
        return list(self.slices.values())

    def create_slice(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.slices[obj["metadata"]["name"]] = obj
        return obj

    def replace_slice(self, obj: dict[str, Any]) -> dict[str, Any]:
        return self.create_slice(obj)

    def delete_slice(self, name: str) -> None:
        self.slices.pop(name, None)


# The DRA allocator's rules over one pool: each device at most once, counters within capacity.
Allocator = DraPoolModel


def _open(work: Path, faults: str = "") -> tuple[Any, Any]:
    from accel.integrations.k8s._kubelet import KubeletPlugin
    from accel.plugin import BackendConfig
    from accel.sim import SimPlugin

    backend = SimPlugin().open(BackendConfig(options={"profile": PROFILE, "state": str(work / "sim.json"),
                                                      "faults": faults}))
    try:
        plugin = KubeletPlugin(driver=DRIVER, node=NODE, inventory=backend.inventory, api=FileApi(work / "api.json"),
                               cdi_dir=work / "cdi", state_dir=work / "state", actuator=backend,
                               log=lambda line: None)
    except BaseException:
        backend.close()
        raise
    return backend, plugin


def setup(work: Path) -> frozenset[str]:
    """Destroy the profile's instances of :data:`CLEARED`; returns the ids of the ones left (foreign)."""
    from accel.plugin import BackendConfig
    from accel.sim import SimPlugin

    backend = SimPlugin().open(BackendConfig(options={"profile": PROFILE, "state": str(work / "sim.json")}))
    for p in backend.partitions():
        if p.profile in CLEARED:
            backend.destroy_partition(p.id)
    kept = frozenset(p.id for p in backend.partitions())
    backend.close()
    return kept


def step(plugin: Any, rng: random.Random, tag: str) -> str:
    """One thing a cluster does: allocate a free device to a new claim and prepare it, or
    unprepare a claim and then deallocate it.  Returns what it did (``prepared``,
    ``prepare-failed``, ``unprepared``, ``unprepare-failed``, ``full``)."""
    from accel.integrations.k8s._kubelet import ClaimFailure, ClaimRef

    plugin.refresh()
    api: FileApi = plugin.api
    claims = api.claims()
    if claims and rng.random() < 0.45:
        name = rng.choice(sorted(claims))
        ref = ClaimRef("default", claims[name]["metadata"]["uid"], name)
        if plugin.unprepare([ref])[ref.uid] is not None:
            return "unprepare-failed"
        api.delete_claim(name)  # deallocated only once unprepared, as the kubelet orders it
        return "unprepared"
    pool = Allocator(plugin.view.slices)
    taken = [r["device"] for c in claims.values() for r in c["status"]["allocation"]["devices"]["results"]]
    free = [d for d in pool.devices if pool.fits([*taken, d])]
    if not free:
        return "full"
    name = f"c{tag}-{len(claims)}-{rng.randrange(10**6)}"
    uid = api.add_claim(name, [rng.choice(free)])
    outcome = plugin.prepare([ClaimRef("default", uid, name)])[uid]
    if isinstance(outcome, ClaimFailure):
        print(f"prepare failed: {outcome.message}", file=sys.stderr, flush=True)
        return "prepare-failed"
    return "prepared"


def worker(work: Path, seed: int, kill_between: bool) -> None:
    """:func:`step` forever (until killed)."""
    rng = random.Random(seed)
    _backend, plugin = _open(work, "partition_kill:0" if kill_between else "")
    print("ready", flush=True)
    while True:
        step(plugin, rng, str(seed))


def violations(work: Path, foreign: frozenset[str]) -> tuple[list[str], int]:
    """What is wrong after a fresh plugin reconciled (empty: nothing), and the partitions it owns."""
    backend, plugin = _open(work)
    out: list[str] = []
    try:
        sim = json.loads((work / "sim.json").read_text())
        if sim["intents"]:
            out.append(f"simulator intents left: {sim['intents']}")
        if plugin.store.pending():
            out.append(f"plugin intents left: {sorted(plugin.store.pending())}")
        live = {p.id: p for p in backend.partitions()}
        if not foreign <= set(live):
            out.append(f"a foreign partition was touched: {sorted(foreign - set(live))} gone")
        half = [p.id for p in live.values() if p.gi_id is not None and p.ci_id is None]
        if half:
            out.append(f"half-made partitions: {half}")
        owners: dict[str, list[str]] = {}
        claims = plugin.store.claims()
        for uid, claim in claims.items():
            for part in claim.partitions:
                owners.setdefault(str(part.partition_id), []).append(uid)
                if part.partition_id not in live:
                    out.append(f"claim {claim.name} names destroyed partition {part.partition_id}")
                else:
                    visible = live[part.partition_id].binding.visible_id or ""
                    spec = plugin.store.spec_path(uid)
                    if not spec.exists() or visible not in spec.read_text():
                        out.append(f"claim {claim.name}: its CDI spec does not name {part.partition_id}")
        for pid in set(live) - foreign:
            if len(owners.get(pid, [])) != 1:
                out.append(f"partition {pid} owned by {owners.get(pid, [])} (orphan or shared)")
        api = plugin.api.claims()
        allocated = {c["metadata"]["uid"] for c in api.values()}
        out += [f"prepared claim {c.name} is not allocated in the API" for u, c in claims.items() if u not in allocated]
        specs = {p.name for p in plugin.store.cdi_dir.iterdir()}
        want = {plugin.store.spec_path(u).name for u in claims}
        if specs != want:
            out.append(f"CDI specs {sorted(specs ^ want)} differ from the prepared claims")
        pool = Allocator(plugin.view.slices)
        taken = [r["device"] for c in api.values() for r in c["status"]["allocation"]["devices"]["results"]]
        if not pool.fits(taken):
            out.append(f"the API's allocations {taken} overdraw the published counters")
        owned = sum(len(v) for v in owners.values())
    finally:
        plugin.close()
        backend.close()
    return out, owned


def chain(rounds: int, work: Path, seed: int = 0, max_delay_s: float = 0.6) -> dict[str, Any]:
    """Run ``rounds`` kill rounds over one node; returns kills, violations and what was owned."""
    rng = random.Random(seed)
    foreign = setup(work)
    killed = 0
    found: list[str] = []
    owned_max = 0
    kinds = {True: 0, False: 0}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[2]),
                                                         os.environ.get("PYTHONPATH", "")])}
    for r in range(rounds):
        between = rng.random() < 0.4
        argv = [sys.executable, __file__, "--worker", str(work), "--seed", str(seed * 1000 + r)]
        delay_s = 0.0 if between else rng.uniform(0.0, max_delay_s)  # the draws of the chains before
        code = kill_round(argv, env, between=between, delay_s=delay_s, timeout_s=60)
        killed += code == -signal.SIGKILL
        kinds[between] += 1
        bad, owned = violations(work, foreign)
        found += [f"round {r}: {line}" for line in bad]
        owned_max = max(owned_max, owned)
    return {"rounds": rounds, "killed": killed, "violations": found, "owned_max": owned_max,
            "between_steps": kinds[True], "at_random": kinds[False]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--kill-between", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(Path(args.worker), args.seed, args.kill_between)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        start = time.monotonic()
        out = chain(args.rounds, Path(tmp), seed=args.seed)
        print(f"rounds {out['rounds']} ({out['between_steps']} killed between a create's or destroy's two steps)  "
              f"killed {out['killed']}  most partitions owned at a check {out['owned_max']}  "
              f"violations {len(out['violations'])}  ({time.monotonic() - start:.1f} s)")
        for line in out["violations"][:20]:
            print(" ", line)
    return 1 if out["violations"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
