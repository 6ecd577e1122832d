"""accel's gres.conf, TaskProlog and HealthCheckProgram on a real Slurm (Debian's 22.05).

One cluster per simulator profile (module scope per profile): the node registers with the
generated GRES, ``srun --gres=gpu:<type>:2`` sees two devices in the vendor's own variable and no
misleading CUDA_VISIBLE_DEVICES, two concurrent jobs get disjoint devices, and a simulated lost
device drains the node with accel's reason in ``sinfo -R`` (and ``--resume`` undrains it).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from ._cluster import Cluster, cluster, missing

pytestmark = pytest.mark.skipif(missing() is not None, reason=missing() or "")

# profile -> (type to request, its vendor variable, the variables that must not carry devices)
PROFILES = {
    "ascend-910b-8": ("ascend_910b3", "ASCEND_RT_VISIBLE_DEVICES", ("CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")),
    "mlu370-x8": ("mlu370_x8", "MLU_VISIBLE_DEVICES", ("CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")),
    "mixed-nvidia-ascend": ("ascend_910b3", "ASCEND_RT_VISIBLE_DEVICES", ("ROCR_VISIBLE_DEVICES",)),
}


@pytest.fixture(scope="module", params=sorted(PROFILES))
def slurm(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Cluster]]:
    profile = request.param
    with cluster(tmp_path_factory.mktemp(f"slurm-{profile}"), profile, health_interval=2) as c:
        yield profile, c


def _env(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def _ids(value: str | None) -> list[str]:
    return [v for v in (value or "").split(",") if v]


def test_node_registers_with_the_generated_gres(slurm: tuple[str, Cluster]) -> None:
    _, c = slurm
    node = c.show_node()
    want = next(ln.split("Gres=", 1)[1] for ln in c.gres_conf.splitlines() if ln.startswith("# slurm.conf: NodeName="))
    for item in want.split(","):
        assert item in node, (item, node)
    assert "State=IDLE" in node


def test_srun_sees_two_devices_in_the_vendor_variable(slurm: tuple[str, Cluster]) -> None:
    profile, c = slurm
    gres_type, var, hidden = PROFILES[profile]
    env = _env(c.run("srun", f"--gres=gpu:{gres_type}:2", "env", timeout=60).stdout)
    assert len(_ids(env.get(var))) == 2, env
    assert len(_ids(env.get("SLURM_STEP_GPUS"))) == 2
    for name in hidden:
        assert not _ids(env.get(name)), (name, env.get(name))
    if profile == "mixed-nvidia-ascend":
        # An NPU job on a mixed node: the node's NVIDIA GPUs are hidden, not all visible.
        assert env.get("CUDA_VISIBLE_DEVICES") == ""
        nv = _env(c.run("srun", "--gres=gpu:nvidia_h100_pcie:2", "env", timeout=60).stdout)
        assert len(_ids(nv.get("CUDA_VISIBLE_DEVICES"))) == 2
        assert all(v.startswith("GPU-") for v in _ids(nv.get("CUDA_VISIBLE_DEVICES")))
        assert nv.get("ASCEND_RT_VISIBLE_DEVICES") == ""


def test_two_concurrent_jobs_get_disjoint_devices(slurm: tuple[str, Cluster]) -> None:
    profile, c = slurm
    gres_type, var, _ = PROFILES[profile]
    script = f'echo "{var}=${var}"; echo "SLURM_STEP_GPUS=$SLURM_STEP_GPUS"; sleep 4'
    cmd = ["srun", f"--gres=gpu:{gres_type}:2", "sh", "-c", script]
    procs = [
        subprocess.Popen(cmd, env=c.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)
    ]
    outs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=60)
            assert p.returncode == 0, (err, c.logs())
            outs.append(_env(out))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    a, b = (set(_ids(o.get(var))) for o in outs)
    assert len(a) == len(b) == 2
    assert not a & b, outs
    sa, sb = (set(_ids(o.get("SLURM_STEP_GPUS"))) for o in outs)
    assert not sa & sb


def _reason(c: Cluster) -> str:
    return c.run("sinfo", "-R", "-h", "-o", "%N|%E").stdout


def test_a_lost_device_drains_the_node_and_resume_undrains(slurm: tuple[str, Cluster]) -> None:
    _, c = slurm
    faults = Path(c.workdir, "faults")
    faults.write_text("device_lost:1")
    try:
        c.wait("drained by accel", lambda: "accel:" in _reason(c), 40)
        line = _reason(c)
        assert c.node in line and "lost" in line, line
        assert "DRAIN" in c.show_node()
    finally:
        faults.write_text("")
    c.wait("resumed", lambda: "accel:" not in _reason(c) and "DRAIN" not in c.show_node(), 40)
