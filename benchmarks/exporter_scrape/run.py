"""NVML calls and CPU time per scrape: ``accel exporter`` against ``nvitop-exporter`` 1.7.2.

Both exporters run in this process, each on its own fresh :class:`FakeNVML` of the same scenario
(default ``h100-nvswitch-8``, a DGX H100), and are scraped alternately, round after round, so
both see the same machine state.  No HTTP: a scrape is what the HTTP handler would do.

* **accel**: ``discover()`` + :class:`~accel.exporter.SnapshotSource` + :class:`AccelCollector`
  (``processes=True``, since nvitop-exporter always exports processes) in a registry with the
  ``ProcessCollector`` and ``PlatformCollector``, as ``accel exporter`` builds it.  A scrape is
  ``generate_latest(registry)``: one snapshot (``Session.read_backend``: ``inventory`` and
  ``telemetry`` in one hand-off to the backend's worker thread), then the exposition.
  ``min_interval_s=0`` so every scrape is a real read.  Discovery is pointed at a temporary
  ``dev_root`` holding ``nvidia0..N`` (the probe wants a PCI function or a device node; NVML
  itself is the fake, installed over ``pynvml``).
* **accel common**: ``accel exporter --fields common --processes``: the backend opened with the
  common selection's ``BackendConfig.readings``, the collector emitting only its families, and a
  registry with only the accel collector (as the nvitop common side has only nvitop's gauges).
* **nvitop**: the objects nvitop-exporter's CLI builds (``Device.from_indices`` +
  ``mig_devices``, ``PrometheusExporter(devices, hostname, registry)``) over a fresh registry
  with the process, platform and GC collectors (the global ``REGISTRY`` it uses by default).
  Its HTTP handler only renders the registry; an update loop (``collect()``) refreshes it every
  ``--interval`` (1 s).  A scrape is one round of that loop (``update_host()`` +
  ``update_device()`` per device) plus ``generate_latest(registry)``: one update per scrape, as at
  a 1 s scrape interval.  nvitop reaches NVML through its own copy of the binding; it is pointed
  at the fake with ``benchmarks/nvml_calls/compare.py``'s :func:`patched_namespace`.
* **nvitop common**: only the common fields (below), read through the same ``Device`` API under
  ``oneshot()`` and set on the same gauges, then the exposition: nvitop's cost for exactly the
  common set.  (The calls of a *full* accel scrape to the functions that serve a common field,
  :data:`ACCEL_COMMON_FUNCTIONS`, are still printed: the earlier measure.)

**Common fields** (both exporters export them): memory total, used and free; GPU and memory
utilisation; SM, memory, graphics and video clocks; power draw; power limit; GPU temperature; fan
speed; PCIe TX and RX throughput; per-process GPU memory; name and UUID (labels).

Measured per scrape, after ``--warmup`` scrapes of each, over ``--scrapes`` rounds:

* NVML calls: the fake's counter (every ``pynvml``-level call, failed ones included), reset
  before each scrape; it is the same every warm scrape (min and max are printed if not).
* CPU: :func:`time.process_time` around the scrape (all threads: accel reads each backend in a
  deadline thread), median.  ``in fake`` is the CPU spent inside the fake's NVML functions (each
  wrapped with :func:`time.thread_time`); ``outside`` = CPU - in fake is the exporter's own cost
  (a real driver's cost per call differs from the fake's, so both are shown).
* wall: :func:`time.perf_counter`, median.

Ratios are accel / nvitop and accel common / nvitop common (<= 1.0: accel costs no more).
Without ``nvitop_exporter`` (not an accel dependency: ``tox -e bench-exporter`` installs it) this
prints one line and exits 0.

    python benchmarks/exporter_scrape/run.py [--scrapes 50] [--warmup 5] [--scenario X] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import logging
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "nvml_calls"))

from compare import (  # the sibling harness (benchmarks/nvml_calls), found through the path above
    COMMON_FUNCTIONS,
    SESSION_FUNCTIONS,
    _nvitop_resolve,
    patched_namespace,
)

from accel.plugins.nvidia.testing import FakeNVML

NVITOP_EXPORTER_VERSION = "1.7.2"
#: The names nvitop's own module keeps (they call ``pynvml`` itself, which is the installed fake).
NVITOP_KEEP = frozenset({"nvmlInit", "nvmlInitWithFlags", "nvmlShutdown", "nvmlQuery", "nvmlQueryFieldValues",
                         "nvmlCheckReturn"})
#: accel's functions (version suffix stripped) that serve a common field.  compare.py's set
#: (nvmlDeviceGetFieldValues is accel's power draw) plus the clocks and PCIe throughput.
ACCEL_COMMON_FUNCTIONS: dict[str, str] = {
    **COMMON_FUNCTIONS,
    "nvmlDeviceGetClockInfo": "clocks",
    "nvmlDeviceGetPcieThroughput": "PCIe throughput",
}
#: What each side exports beyond the common fields (read from both sources; README.md lists them).
ONLY_ACCEL = ("energy", "memory temperature", "thermal limits", "throttle reasons", "PCIe replays",
              "ECC corrected/uncorrected", "retired pages", "NVLink per-link CRC/replay/recovery",
              "link state/lanes/bandwidth (topology)", "health state/conditions/checked time",
              "operational state", "partitions", "leak verdicts", "inventory problems/complete",
              "exporter self-metrics")
ONLY_NVITOP = ("encoder/decoder utilisation", "memory percent", "NVLink TX/RX throughput (total, mean, per link)",
               "host CPU/memory/swap/load/uptime", "host network and disk I/O, disk usage",
               "per-process host metrics (CPU, RSS, running time, status, command) and SM/memory/"
               "encoder/decoder utilisation", "driver and CUDA driver version (info)")


def available() -> str | None:
    """nvitop-exporter's version, or ``None`` when it (or prometheus_client) is not importable."""
    try:
        importlib.import_module("prometheus_client")
        mod = importlib.import_module("nvitop_exporter")
    except Exception:  # noqa: BLE001 -- any import failure means "not measurable here"
        return None
    return str(getattr(mod, "__version__", "?"))


# -- the fake, with CPU accounting ------------------------------------------------------------

class _InFake(threading.local):
    depth = 0


def timed_fake(scenario: str) -> FakeNVML:
    """A fresh fake whose ``nvml*`` functions add their own thread CPU time to ``fake.cpu_in``."""
    fake = FakeNVML(scenario)
    local = _InFake()
    fake.cpu_in = 0.0  # type: ignore[attr-defined]

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            if local.depth:
                return fn(*args, **kwargs)
            local.depth += 1
            start = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                fake.cpu_in += time.thread_time() - start  # type: ignore[attr-defined]
                local.depth -= 1
        return timed

    # Instance attributes shadow the methods: install() and getattr(fake, name) both see them.
    for name, fn in fake._functions().items():
        setattr(fake, name, wrap(fn))
    return fake


# -- the two exporters --------------------------------------------------------------------------

class AccelSide:
    """``accel exporter``'s registry over the nvidia backend on ``fake``.

    ``common``: ``accel exporter --fields common --processes``: the backend is opened with the
    common selection's readings and the collector emits only its families; the registry holds
    only the accel collector, as the nvitop common side holds only nvitop's gauges.
    """

    def __init__(self, fake: FakeNVML, *, common: bool = False) -> None:
        from prometheus_client import CollectorRegistry
        from prometheus_client.platform_collector import PlatformCollector
        from prometheus_client.process_collector import ProcessCollector

        from accel.discovery import discover
        from accel.exporter import AccelCollector, SnapshotSource, parse_fields
        from accel.plugin import BackendConfig

        self.label = "accel common" if common else "accel"
        self.common = common
        fields = parse_fields("common" if common else "full", processes=True)
        self.fake = fake
        self._tmp = tempfile.TemporaryDirectory(prefix="accel-bench-dev-")
        dev = Path(self._tmp.name)
        for i in range(len(fake.scenario.gpus)):
            (dev / f"nvidia{i}").touch()
        config = BackendConfig(dev_root=dev, readings=fields.readings)
        with self.active():
            report = discover(default_config=config, backends=["nvidia"])
            self.source = SnapshotSource(report, default_config=config, min_interval_s=0.0)
        if self.source.backend_names != ["nvidia"] or not self.source._sessions:
            raise RuntimeError(f"the nvidia backend did not open on the fake: {report.entry('nvidia')}")
        self.registry = CollectorRegistry()
        self.registry.register(AccelCollector(self.source, processes=True, fields=fields))
        if not common:
            ProcessCollector(registry=self.registry)
            PlatformCollector(registry=self.registry)
        #: The backend read of the last scrape (inventory and telemetry, one hand-off to the
        #: backend's worker thread): NVML calls and CPU.
        self.phases: dict[str, tuple[int, float]] = {}
        inner = self.source._read_backend

        def read(name: str, session: Any) -> Any:
            before, start = sum(self.fake.calls.values()), time.process_time()
            try:
                return inner(name, session)
            finally:
                self.phases["read"] = (sum(self.fake.calls.values()) - before, time.process_time() - start)

        self.source._read_backend = read  # type: ignore[method-assign]

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        with self.fake.installed():
            yield

    def scrape(self) -> bytes:
        from prometheus_client import generate_latest

        return generate_latest(self.registry)

    def close(self) -> None:
        with self.active():
            self.source.close()
        self._tmp.cleanup()


class NvitopSide:
    """nvitop-exporter's ``PrometheusExporter`` over ``fake``, built as its CLI builds it."""

    def __init__(self, fake: FakeNVML, *, common: bool = False) -> None:
        import nvitop  # type: ignore[import-untyped]
        from nvitop.api import libnvml  # type: ignore[import-untyped]
        from nvitop_exporter.exporter import PrometheusExporter  # type: ignore[import-untyped]
        from prometheus_client import CollectorRegistry
        from prometheus_client.gc_collector import GCCollector
        from prometheus_client.platform_collector import PlatformCollector
        from prometheus_client.process_collector import ProcessCollector

        self.label = "nvitop common" if common else "nvitop"
        self.fake = fake
        self.common = common
        self._libnvml = libnvml
        self._log: logging.Logger = libnvml.LOGGER
        self._resolve = _nvitop_resolve(fake)
        with self.active():
            count = nvitop.Device.count()  # nvitop's first NVML use initialises it, once per process
            if fake.refcount == 0:
                # nvitop is already initialised (by another side's fake): this fake's driver too.
                fake.nvmlInit()
                count = nvitop.Device.count()
            physical = nvitop.Device.from_indices(range(count))
            mig = [m for d in physical for m in d.mig_devices()]
            self.devices = sorted(physical + mig, key=lambda d: (d.index,) if isinstance(d.index, int) else d.index)
            for d in self.devices:
                d.name(), d.uuid()
            self.registry = CollectorRegistry()
            if not common:
                ProcessCollector(registry=self.registry)
                PlatformCollector(registry=self.registry)
                GCCollector(registry=self.registry)
            self.exporter = PrometheusExporter(self.devices, hostname="bench", registry=self.registry)

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        previous = self._log.disabled
        self._log.disabled = True  # nvitop logs a traceback per FunctionNotFound; the counts say it
        try:
            with self.fake.installed(), patched_namespace(self._libnvml, self.fake, NVITOP_KEEP, self._resolve):
                yield
        finally:
            self._log.disabled = previous

    def scrape(self) -> bytes:
        from prometheus_client import generate_latest

        if self.common:
            for device in self.devices:
                self._update_common(device)
        else:
            self.exporter.update_host()
            for device in self.devices:
                self.exporter.update_device(device)
        return generate_latest(self.registry)

    def _update_common(self, device: Any) -> None:
        """``update_device`` cut to the common fields (same API calls, same gauges)."""
        from nvitop import GpuProcess, MiB

        e = self.exporter
        index = str(device.index) if isinstance(device.index, int) else ":".join(map(str, device.index))
        labels = {"hostname": e.hostname, "index": index, "devicename": device.name(), "uuid": device.uuid()}
        with device.oneshot():
            clocks = device.clock_infos()
            for gauge, value in (
                (e.gpu_utilization, float(device.gpu_utilization())),
                (e.gpu_memory_utilization, float(device.memory_utilization())),
                (e.gpu_memory_total, device.memory_total() / MiB),
                (e.gpu_memory_used, device.memory_used() / MiB),
                (e.gpu_memory_free, device.memory_free() / MiB),
                (e.gpu_clock_sm, float(clocks.sm)),
                (e.gpu_clock_memory, float(clocks.memory)),
                (e.gpu_clock_graphics, float(clocks.graphics)),
                (e.gpu_clock_video, float(clocks.video)),
                (e.gpu_power_usage, device.power_usage() / 1000.0),
                (e.gpu_power_limit, device.power_limit() / 1000.0),
                (e.gpu_temperature, float(device.temperature())),
                (e.gpu_fan_speed, float(device.fan_speed())),
                (e.gpu_pcie_tx_throughput, device.pcie_tx_throughput() / 1024.0),
                (e.gpu_pcie_rx_throughput, device.pcie_rx_throughput() / 1024.0),
            ):
                gauge.labels(**labels).set(value)
        with GpuProcess.failsafe():
            for pid, process in device.processes().items():
                e.process_gpu_memory.labels(**labels, pid=pid, username="").set(process.gpu_memory() / MiB)

    def close(self) -> None:
        with self.active(), contextlib.suppress(Exception):
            self._libnvml.nvmlShutdown()


# -- measurement ----------------------------------------------------------------------------------

def _one(side: Any) -> dict[str, Any]:
    fake = side.fake
    with side.active():
        fake.reset_calls()
        fake.cpu_in = 0.0
        cpu0, wall0 = time.process_time(), time.perf_counter()
        body = side.scrape()
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        calls = Counter(fake.calls)
    return {"calls": calls, "cpu": cpu, "in_fake": fake.cpu_in, "wall": wall, "bytes": len(body),
            "samples": sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))}


def accel_common_calls(calls: Counter[str]) -> int:
    """Calls in an accel scrape of the functions that serve a common field (or the session)."""
    import re

    version = re.compile(r"_v\d+$")
    return sum(n for fn, n in calls.items()
               if fn in SESSION_FUNCTIONS or version.sub("", fn) in ACCEL_COMMON_FUNCTIONS)


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    totals = [sum(r["calls"].values()) for r in rows]
    out = {
        "calls": statistics.median(totals), "calls_min": min(totals), "calls_max": max(totals),
        "cpu_ms": 1000 * statistics.median(r["cpu"] for r in rows),
        "in_fake_ms": 1000 * statistics.median(r["in_fake"] for r in rows),
        "outside_ms": 1000 * statistics.median(r["cpu"] - r["in_fake"] for r in rows),
        "wall_ms": 1000 * statistics.median(r["wall"] for r in rows),
        "samples": statistics.median(r["samples"] for r in rows),
        "bytes": statistics.median(r["bytes"] for r in rows),
        "per_function": dict(sorted(rows[-1]["calls"].items())),
    }
    return out


def measure(scenario: str, scrapes: int, warmup: int) -> dict[str, Any]:
    """Warm up, then ``scrapes`` rounds alternating accel, accel common, nvitop and nvitop common
    (the order rotates every round)."""
    accel = AccelSide(timed_fake(scenario))
    accel_common = AccelSide(timed_fake(scenario), common=True)
    sides: list[Any] = [accel, accel_common, NvitopSide(timed_fake(scenario)),
                        NvitopSide(timed_fake(scenario), common=True)]
    cold = {s.label: sum(s.fake.calls.values()) for s in sides}
    rows: dict[str, list[dict[str, Any]]] = {s.label: [] for s in sides}
    phases: dict[str, dict[str, list[tuple[int, float]]]] = {
        s.label: {"read": []} for s in (accel, accel_common)}
    try:
        first = {s.label: _one(s) for s in sides}
        for _ in range(max(warmup - 1, 0)):
            for s in sides:
                _one(s)
        for i in range(scrapes):
            k = i % len(sides)
            for s in sides[k:] + sides[:k]:
                rows[s.label].append(_one(s))
                if isinstance(s, AccelSide):
                    for what, value in s.phases.items():
                        phases[s.label][what].append(value)
    finally:
        for s in sides:
            s.close()
    result: dict[str, Any] = {"scenario": scenario, "gpus": len(accel.fake.scenario.gpus), "scrapes": scrapes,
                              "warmup": warmup, "setup_calls": cold,
                              "first_scrape_calls": {k: sum(v["calls"].values()) for k, v in first.items()}}
    for label, got in rows.items():
        result[label] = _summary(got)
    result["accel"]["common_calls"] = statistics.median(accel_common_calls(r["calls"]) for r in rows["accel"])
    for label, got in phases.items():
        result[label]["phases"] = {
            what: {"calls": statistics.median(c for c, _ in v), "cpu_ms": 1000 * statistics.median(t for _, t in v)}
            for what, v in got.items() if v}
    a, ac, n, nc = result["accel"], result["accel common"], result["nvitop"], result["nvitop common"]
    result["ratios"] = {
        "calls_full": a["calls"] / n["calls"], "cpu_full": a["cpu_ms"] / n["cpu_ms"],
        "outside_fake_full": a["outside_ms"] / n["outside_ms"], "wall_full": a["wall_ms"] / n["wall_ms"],
        "calls_common": ac["calls"] / nc["calls"], "cpu_common": ac["cpu_ms"] / nc["cpu_ms"],
        "outside_fake_common": ac["outside_ms"] / nc["outside_ms"], "wall_common": ac["wall_ms"] / nc["wall_ms"],
        # The full scrape's calls of the functions that serve a common field (the former measure).
        "calls_common_in_full": a["common_calls"] / nc["calls"],
    }
    return result


def _calls(s: dict[str, Any]) -> str:
    c = f"{s['calls']:g}"
    return c if s["calls_min"] == s["calls_max"] else f"{c} ({s['calls_min']}-{s['calls_max']})"


def print_result(r: dict[str, Any]) -> None:
    a, ac, n, nc, q = r["accel"], r["accel common"], r["nvitop"], r["nvitop common"], r["ratios"]
    print(f"exporter scrape: {r['scenario']} ({r['gpus']} GPUs), {r['scrapes']} scrapes each after "
          f"{r['warmup']} warm-up, alternating, one process")
    print(f"{'':16} {'NVML calls':>10} {'CPU ms':>7} {'in fake':>8} {'outside':>8} {'wall ms':>8} {'samples':>8}")
    for label, s in (("accel (full)", a), ("accel common", ac), ("nvitop (full)", n), ("nvitop common", nc)):
        print(f"{label:16} {_calls(s):>10} {s['cpu_ms']:7.2f} {s['in_fake_ms']:8.2f} "
              f"{s['outside_ms']:8.2f} {s['wall_ms']:8.2f} {s['samples']:8g}")
    print(f"ratios accel/nvitop: full scrape: calls {q['calls_full']:.2f}, CPU {q['cpu_full']:.2f}, "
          f"CPU outside the fake {q['outside_fake_full']:.2f}, wall {q['wall_full']:.2f}")
    print(f"                     common fields: calls {q['calls_common']:.2f}, CPU {q['cpu_common']:.2f}, "
          f"CPU outside the fake {q['outside_fake_common']:.2f}, wall {q['wall_common']:.2f}")
    print(f"(the full scrape's calls of the functions serving a common field: {a['common_calls']:g}, "
          f"{q['calls_common_in_full']:.2f} of nvitop common's)")
    for label, s in (("accel", a), ("accel common", ac)):
        ph = s["phases"]
        print(f"{label}: backend read (inventory + telemetry) " + ", ".join(
            f"{v['calls']:g} calls / {v['cpu_ms']:.2f} ms" for v in ph.values())
            + f"; render + exposition {s['cpu_ms'] - sum(v['cpu_ms'] for v in ph.values()):.2f} ms")
    verdict = "meets" if q["calls_common"] <= 1.0 and q["cpu_common"] <= 1.0 else "does NOT meet"
    print(f"goal (accel --fields common <= nvitop-exporter for the common fields, calls and CPU): {verdict}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--scenario", default="h100-nvswitch-8")
    parser.add_argument("--scrapes", type=int, default=50, help="measured scrapes per exporter (default 50)")
    parser.add_argument("--warmup", type=int, default=5, help="warm-up scrapes per exporter (default 5)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    version = available()
    if version is None:
        print(f"exporter scrape: skipped (nvitop-exporter is not installed; pip install "
              f"nvitop-exporter=={NVITOP_EXPORTER_VERSION}, or tox -e bench-exporter)")
        return 0
    if version != NVITOP_EXPORTER_VERSION:
        print(f"exporter scrape: note: nvitop-exporter {version}, the README's numbers are for "
              f"{NVITOP_EXPORTER_VERSION}")
    result = measure(args.scenario, max(args.scrapes, 1), max(args.warmup, 1))
    result["nvitop_exporter"] = version
    if args.json:
        print(json.dumps(result, indent=2, default=str))
    else:
        print_result(result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
