"""Dynamic partitions in the DRA kubelet plugin (``--dynamic-partitions``), over gRPC, the fake API
server (every slice checked against the 1.37 schema) and the simulator's MIG actuation with a
state file (the partitions outlive a plugin, as on hardware)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from accel.integrations.k8s._kubelet_state import ClaimStore, OwnedPartition, Pending
from accel.model import Partition
from accel.plugin import BackendConfig
from accel.sim import SimPlugin
from tests.k8s_kubelet._fakeapi import FakeApiServer
from tests.k8s_kubelet.conftest import DRIVER, Start, cdi_errors, dra_v1_pb2
from tests.k8s_kubelet.test_plugin import prepare, published, result, unprepare

GPU = "gpu-0000-07-00-0"


class Node:
    """The simulated a100-mig node: a backend over a state file, reopened as a restart does."""

    def __init__(self, base: Path, keep: tuple[str, ...]) -> None:
        self.state = base / "sim.json"
        self.backend = self.open()
        for p in self.backend.partitions():  # the profile's own instances, less those kept (foreign)
            if p.profile not in keep:
                self.backend.destroy_partition(p.id)
        self.foreign = {p.id for p in self.backend.partitions()}

    def open(self) -> Any:
        return SimPlugin().open(BackendConfig(options={"profile": "a100-mig", "state": str(self.state)}))

    def live(self) -> dict[str, Partition]:
        return {p.id: p for p in self.open().partitions()}

    def mine(self) -> dict[str, Partition]:
        return {k: v for k, v in self.live().items() if k not in self.foreign}


@pytest.fixture
def node(short_dir: Path) -> Iterator[Node]:
    n = Node(short_dir, keep=("1g.10gb",))  # the two 1g.10gb at slots 2 and 3 stay
    yield n
    n.backend.close()


@pytest.fixture
def empty(short_dir: Path) -> Iterator[Node]:
    n = Node(short_dir, keep=())
    yield n
    n.backend.close()


def test_publishes_every_placement_with_shared_counters_checked_by_schema(start: Start, fake: FakeApiServer,
                                                                         empty: Node) -> None:
    r = start(empty.backend.inventory, actuator=empty.backend)
    r.plugin.publish()
    assert fake.validated == len(fake.slices)  # the 1.37 schema, strictly
    devices = published(fake)
    # A100-80GB: 1g.10gb x7, 1g.20gb x4, 2g.20gb x3, 3g.40gb x2, 4g.40gb x1, 7g.80gb x1; no whole GPU
    assert len(devices) == 18 and GPU not in devices
    (cset,) = [c for s in fake.slices.values() for c in s["spec"].get("sharedCounters", [])]
    assert {k: v["value"] for k, v in cset["counters"].items()} == {**{f"slot-{i}": "1" for i in range(8)},
                                                                    "compute-slices": "7"}
    three = devices[f"{GPU}-3g40gb-4"]
    assert three["consumesCounters"] == [{"counterSet": cset["name"], "counters": {
        **{f"slot-{i}": {"value": "1"} for i in range(4, 8)}, "compute-slices": {"value": "3"}}}]
    assert three["attributes"]["accel.dev/partitionProfile"] == {"string": "3g.40gb"}
    assert three["attributes"]["accel.dev/placementStart"] == {"int": 4}
    assert three["capacity"]["accel.dev/memory"] == {"value": str(40192 * 2**20)}


def test_prepare_creates_the_allocated_partition_and_unprepare_destroys_it(start: Start, fake: FakeApiServer,
                                                                           node: Node) -> None:
    r = start(node.backend.inventory, actuator=node.backend)
    uid = fake.add_claim("default", "big", [result(f"{GPU}-3g40gb-4")])
    stub = r.v1()
    first = prepare(stub, dra_v1_pb2, (uid, "big"))
    assert not first.claims[uid].error
    (made,) = node.mine().values()
    assert (made.profile, made.placement and made.placement.start) == ("3g.40gb", 4)
    (dev,) = first.claims[uid].devices
    assert dev.device_name == f"{GPU}-3g40gb-4"
    spec = json.loads(r.plugin.store.spec_path(uid).read_text())
    assert not cdi_errors(spec)
    (entry,) = spec["devices"]
    assert any(e.endswith(f"={made.uuid}") for e in entry["containerEdits"]["env"])
    ckpt = json.loads((r.base / "state" / "checkpoint.json").read_text())
    assert ckpt["version"] == 2 and ckpt["claims"][uid]["partitions"][0]["partitionId"] == made.id
    assert "pending" not in ckpt
    again = prepare(stub, dra_v1_pb2, (uid, "big"))  # the kubelet repeats: same answer, nothing made
    assert again == first and set(node.mine()) == {made.id}
    unprepare(stub, dra_v1_pb2, (uid, "big"))
    assert node.mine() == {} and not r.plugin.store.spec_path(uid).exists()
    assert set(node.live()) == node.foreign  # the foreign instances are untouched
    unprepare(stub, dra_v1_pb2, (uid, "big"))  # again: success, nothing to do
    assert json.loads((r.base / "state" / "checkpoint.json").read_text())["claims"] == {}


def test_a_foreign_partition_is_offered_as_it_is_and_never_destroyed(start: Start, fake: FakeApiServer,
                                                                     node: Node) -> None:
    r = start(node.backend.inventory, actuator=node.backend)
    r.plugin.publish()
    devices = published(fake)
    assert {f"{GPU}-1g10gb-2", f"{GPU}-1g10gb-3"} <= set(devices)
    # What overlaps slots 2-3 is not offered; compute capacity is what the two do not take.
    assert not any(n in devices for n in (f"{GPU}-2g20gb-2", f"{GPU}-3g40gb-0", f"{GPU}-4g40gb-0",
                                          f"{GPU}-7g80gb-0", f"{GPU}-1g20gb-2"))
    (cset,) = [c for s in fake.slices.values() for c in s["spec"].get("sharedCounters", [])]
    assert cset["counters"]["compute-slices"] == {"value": "5"}
    uid = fake.add_claim("default", "small", [result(f"{GPU}-1g10gb-2")])
    stub = r.v1()
    assert not prepare(stub, dra_v1_pb2, (uid, "small")).claims[uid].error
    assert node.mine() == {}  # used as it is
    unprepare(stub, dra_v1_pb2, (uid, "small"))
    assert set(node.live()) == node.foreign


def test_a_refused_create_fails_the_claim_and_leaves_nothing(start: Start, fake: FakeApiServer, node: Node) -> None:
    r = start(node.backend.inventory, actuator=node.backend)
    node.open().create_partition(node.backend.inventory().devices[0].id, "2g.20gb", placement_start=4)
    uid = fake.add_claim("default", "late", [result(f"{GPU}-3g40gb-4")])  # allocated from the older slices
    with pytest.raises(grpc.RpcError) as err:
        prepare(r.v1(), dra_v1_pb2, (uid, "late"))
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "no placement left" in (err.value.details() or "")
    assert r.plugin.store.pending() == {} and r.plugin.store.claims() == {}
    assert [p.profile for p in node.mine().values()] == ["2g.20gb"]  # not ours: kept


def test_two_claims_of_one_call_each_get_their_partition(start: Start, fake: FakeApiServer, empty: Node) -> None:
    r = start(empty.backend.inventory, actuator=empty.backend)
    a = fake.add_claim("default", "a", [result(f"{GPU}-4g40gb-0")])
    b = fake.add_claim("default", "b", [result(f"{GPU}-1g20gb-6"), result(f"{GPU}-1g10gb-4", request="second")])
    out = prepare(r.v1(), dra_v1_pb2, (a, "a"), (b, "b"))
    assert not out.claims[a].error and not out.claims[b].error
    assert sorted((p.profile, p.placement.start if p.placement else None) for p in empty.mine().values()) == [
        ("1g.10gb", 4), ("1g.20gb", 6), ("4g.40gb", 0)]
    unprepare(r.v1(), dra_v1_pb2, (b, "b"))
    assert [p.profile for p in empty.mine().values()] == ["4g.40gb"]


def _crash_state(base: Path, node: Node) -> dict[str, str]:
    """The checkpoint and partitions of a plugin killed at each point of its work, one claim each."""
    gpu = node.backend.inventory().devices[0].id
    store = ClaimStore(DRIVER, base / "state", base / "cdi")
    foreign = tuple(sorted(node.foreign))
    # killed after its create, before the id was written: found by its placement (not in `before`)
    lost_id = node.backend.create_partition(gpu, "1g.20gb", placement_start=6)
    store.set_pending("u-created", Pending("prepare", "default", "created", (
        OwnedPartition(f"{GPU}-1g20gb-6", gpu, "1g.20gb", 6, None, foreign),)))
    # killed after recording the id, before the spec and checkpoint
    recorded = node.backend.create_partition(gpu, "1g.10gb", placement_start=5)
    store.set_pending("u-recorded", Pending("prepare", "default", "recorded", (
        OwnedPartition(f"{GPU}-1g10gb-5", gpu, "1g.10gb", 5, recorded.id, foreign),)))
    # killed before its create: a foreign partition at that very placement existed before: kept
    store.set_pending("u-before", Pending("prepare", "default", "before", (
        OwnedPartition(f"{GPU}-1g10gb-3", gpu, "1g.10gb", 3, None, foreign),)))
    # killed half-way through an unprepare: completed
    doomed = node.backend.create_partition(gpu, "1g.10gb", placement_start=0)
    store.set_pending("u-unprep", Pending("unprepare", "default", "unprep", (
        OwnedPartition(f"{GPU}-1g10gb-0", gpu, "1g.10gb", 0, doomed.id),)))
    store.close()
    return {"lost": lost_id.id, "recorded": recorded.id, "doomed": doomed.id}


def test_a_restart_finishes_every_intent_and_touches_nothing_else(start: Start, fake: FakeApiServer, node: Node,
                                                                  short_dir: Path) -> None:
    ids = _crash_state(short_dir, node)
    r = start(node.backend.inventory, actuator=node.backend)  # the restart
    assert r.plugin.store.pending() == {}
    assert node.mine() == {} and set(node.live()) == node.foreign, ids
    # and a prepared claim keeps its partition across a restart
    uid = fake.add_claim("default", "kept", [result(f"{GPU}-3g40gb-4")])
    assert not prepare(r.v1(), dra_v1_pb2, (uid, "kept")).claims[uid].error
    r.stop()
    r2 = start(node.backend.inventory, actuator=node.backend)
    assert [p.profile for p in node.mine().values()] == ["3g.40gb"]
    assert r2.plugin.store.get(uid) is not None and r2.plugin.store.spec_path(uid).exists()


def test_a_version_1_checkpoint_is_read(start: Start, node: Node, short_dir: Path) -> None:
    state = short_dir / "state"
    state.mkdir()
    (state / "checkpoint.json").write_text(json.dumps({"version": 1, "driver": DRIVER, "claims": {}}))
    r = start(node.backend.inventory, actuator=node.backend)
    assert r.plugin.store.claims() == {}


def test_without_the_flag_nothing_is_made(start: Start, fake: FakeApiServer, empty: Node) -> None:
    r = start(empty.backend.inventory)
    r.plugin.publish()
    assert not any("placementStart" in str(d) for d in published(fake).values())
    uid = fake.add_claim("default", "x", [result(f"{GPU}-3g40gb-4")])
    with pytest.raises(grpc.RpcError) as err:
        prepare(r.v1(), dra_v1_pb2, (uid, "x"))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND and empty.mine() == {}


def test_the_command_line_wiring(short_dir: Path, empty: Node) -> None:
    """``--dynamic-partitions`` parses, finds the actuating backend, and is refused without one
    (the process itself: tests/k8s_kubelet/test_cli.py)."""
    from accel.cli._commands import _session
    from accel.cli._kubelet import _actuator
    from accel.cli._parser import parse
    from accel.errors import ConfigError
    from accel.integrations.k8s._kubelet import main as plugin_main
    from accel.plugin import SupportsPartitionActuation

    args = parse(["k8s", "kubelet-plugin", "--sim", "a100-mig", "-o", f"state={empty.state}", "--dynamic-partitions",
                  "--node-name", "node-1", "--plugin-dir", str(short_dir / "p"), "--cdi-dir", str(short_dir / "c")])
    assert args.dynamic_partitions is True
    with _session(args) as session:
        found = _actuator(session)
        assert isinstance(found, SupportsPartitionActuation)
        assert {p.name for p in found.partition_profiles()} >= {"1g.10gb", "7g.80gb"}
        with pytest.raises(ConfigError, match="--dynamic-partitions needs"):
            plugin_main(args, session.inventory, None)


def test_a_checkpoint_that_owns_partitions_needs_the_flag(start: Start, fake: FakeApiServer, empty: Node) -> None:
    from accel.errors import ConfigError

    r = start(empty.backend.inventory, actuator=empty.backend)
    uid = fake.add_claim("default", "own", [result(f"{GPU}-1g10gb-0")])
    assert not prepare(r.v1(), dra_v1_pb2, (uid, "own")).claims[uid].error
    r.stop()
    with pytest.raises(ConfigError, match="--dynamic-partitions"):
        start(empty.backend.inventory)  # without it, an unprepare would orphan the partition
    assert len(empty.mine()) == 1


def test_a_busy_partition_keeps_the_unprepare_until_it_can_be_destroyed(start: Start, fake: FakeApiServer,
                                                                        empty: Node) -> None:
    busy = SimPlugin().open(BackendConfig(options={"profile": "a100-mig", "state": str(empty.state),
                                                   "faults": "partition_busy:0"}))
    r = start(busy.inventory, actuator=busy)
    uid = fake.add_claim("default", "busy", [result(f"{GPU}-2g20gb-0")])
    assert not prepare(r.v1(), dra_v1_pb2, (uid, "busy")).claims[uid].error
    with pytest.raises(grpc.RpcError) as err:
        unprepare(r.v1(), dra_v1_pb2, (uid, "busy"))
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "in use" in (err.value.details() or "")
    # No longer a prepared claim (its spec is gone), but the intent keeps the partition owned.
    assert r.plugin.store.claims() == {} and list(r.plugin.store.pending()) == [uid]
    assert not r.plugin.store.spec_path(uid).exists() and len(empty.mine()) == 1
    r.stop()
    busy.close()
    r2 = start(empty.backend.inventory, actuator=empty.backend)  # idle now: the restart finishes it
    assert r2.plugin.store.pending() == {} and empty.mine() == {}
