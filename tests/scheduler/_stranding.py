"""The small stranding workload and one-device-per-host cluster the ``fgd-plus-admit`` and
``fgd-plus-demand`` tests share."""

from __future__ import annotations

from accel.scheduler import ClusterState, DeviceSpec, HostSpec, Request, Scheduler, Share

GIB = 1 << 30
# 20 whole devices, 10 x 810, 10 x 450, 1 x 100 = 32,700 milli: 20 / 32,700 whole devices per milli;
# 190 milli left by an 810 share is stranded (1 of 41 device requests fits there, under 5%);
# 550 left by a 450 share is not (11 of 41)
WORKLOAD = ([Request(f"w{i}", cpu_milli=1000, devices=1) for i in range(20)]
            + [Request(f"b{i}", cpu_milli=1000, share=Share(810)) for i in range(10)]
            + [Request(f"h{i}", cpu_milli=1000, share=Share(450)) for i in range(10)]
            + [Request("s0", cpu_milli=1000, share=Share(100))])


def one_device_hosts(n: int = 8) -> ClusterState:
    """``n`` hosts of one G2 device each, 64 cores and 256 GiB."""
    return ClusterState.from_specs([
        HostSpec(f"n{i}", 64_000, 256 * GIB, (DeviceSpec(id=f"n{i}/0", vendor="nvidia", model="G2"),))
        for i in range(n)])


def fill_whole(sched: Scheduler, n: int) -> None:
    """Place ``n`` one-device pods."""
    for i in range(n):
        assert sched.place(Request(f"fill{i}", cpu_milli=1000, devices=1)) is not None
