"""What ``accel exporter --labels dcgm`` costs against the default ``--labels accel``, in one run.

One :class:`~accel.exporter.SnapshotSource` over the simulator (default profile ``dgx-h100``: 8x
H100 with NVLink) is read once (``min_interval_s`` of an hour, so every scrape reuses
the same snapshot and only what the label choice changes is timed: the collector's families and
``generate_latest``).  Variants, each a registry holding only an :class:`AccelCollector`:

* ``accel``: the default (``device`` on value series);
* ``dcgm``: ``--labels dcgm`` (``gpu``, ``UUID``, ``modelName``, ``Hostname``, ``pci_bus_id``,
  ``DCGM_FI_DRIVER_VERSION`` on every value series);
* ``accel+pods``: the default with attribution: every device held by ``--pods`` containers
  (``accel_device_pod_info``, the series the default adds);
* ``dcgm+pods``: ``--labels dcgm`` with the same attribution: one copy of each value series
  per holding container, as dcgm-exporter ``--kubernetes`` does.

The pods come from an in-process holder source with a fixed answer (the PodResources call is cached
for ``--attribution-interval`` and is not what the labels cost; its own deadline is tested in
tests/exporter/test_attribution.py).

Printed per variant: sample lines, exposition bytes, distinct ``label="value"`` pairs (what a
TSDB's inverted index holds for this target), and the median CPU (``time.process_time``) and wall
time of one collect + exposition over ``--scrapes`` after ``--warmup``; then each as a ratio to
``accel`` measured in the same run, the variants interleaved round by round.

    python benchmarks/exporter_scrape/labels.py [--profile dgx-h100] [--scrapes 200] [--warmup 10] [--pods 1] [--json]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from collections.abc import Iterable, Mapping
from typing import Any

from accel.discovery import discover
from accel.exporter import AccelCollector, Attribution, SnapshotSource
from accel.integrations.k8s._podresources import DeviceHolder
from accel.model import Device
from accel.plugin import BackendConfig

_PAIR = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


class StaticPods:
    """Every device held by ``per_device`` containers of distinct pods."""

    def __init__(self, per_device: int) -> None:
        self.per_device = per_device

    def holders(self, devices: Iterable[Device]) -> Mapping[str, tuple[DeviceHolder, ...]]:
        return {d.id: tuple(DeviceHolder("team", f"job-{i}-{k}", "main") for k in range(self.per_device))
                for i, d in enumerate(devices)}


def _registry(source: SnapshotSource, labels: str, pods: int) -> Any:
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry()
    attribution = Attribution(pods=StaticPods(pods), ttl_s=3600) if pods else None
    registry.register(AccelCollector(source, labels=labels, attribution=attribution))
    return registry


def _shape(text: str) -> dict[str, int]:
    lines = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
    pairs = {m.group(0) for ln in lines for m in _PAIR.finditer(ln.split("} ", 1)[0])}
    return {"samples": len(lines), "bytes": len(text.encode()), "label_pairs": len(pairs)}


def measure(profile: str, scrapes: int, warmup: int, pods: int) -> dict[str, Any]:
    from prometheus_client import generate_latest

    config = BackendConfig(options={"profile": profile})
    report = discover(backends=["sim"], default_config=config)
    source = SnapshotSource(report, {}, config, min_interval_s=3600)
    try:
        source.get()
        variants = {"accel": ("accel", 0), "dcgm": ("dcgm", 0),
                    "accel+pods": ("accel", pods), "dcgm+pods": ("dcgm", pods)}
        registries = {name: _registry(source, labels, n) for name, (labels, n) in variants.items()}
        shapes = {name: _shape(generate_latest(r).decode()) for name, r in registries.items()}
        cpu: dict[str, list[float]] = {n: [] for n in registries}
        wall: dict[str, list[float]] = {n: [] for n in registries}
        names = list(registries)
        for i in range(warmup + scrapes):
            order = names[i % len(names):] + names[:i % len(names)]  # rotate who goes first
            for name in order:
                c0, w0 = time.process_time(), time.perf_counter()
                generate_latest(registries[name])
                c1, w1 = time.process_time(), time.perf_counter()
                if i >= warmup:
                    cpu[name].append(c1 - c0)
                    wall[name].append(w1 - w0)
    finally:
        source.close()
    rows = {n: {**shapes[n], "cpu_ms": statistics.median(cpu[n]) * 1e3, "wall_ms": statistics.median(wall[n]) * 1e3}
            for n in names}
    base = rows["accel"]
    ratios = {n: {k: (r[k] / base[k] if base[k] else float("nan")) for k in r} for n, r in rows.items()}
    return {"profile": profile, "scrapes": scrapes, "warmup": warmup, "pods_per_device": pods,
            "rows": rows, "ratio_to_accel": ratios}


def print_result(r: dict[str, Any]) -> None:
    print(f"exporter labels: profile {r['profile']}, {r['scrapes']} scrapes after {r['warmup']} warm-up, "
          f"{r['pods_per_device']} pod(s) per device in the +pods variants; one collect + exposition")
    head = f"{'variant':<11} {'samples':>8} {'bytes':>8} {'pairs':>6} {'cpu ms':>8} {'wall ms':>8}"
    print(head)
    for name, row in r["rows"].items():
        print(f"{name:<11} {row['samples']:>8} {row['bytes']:>8} {row['label_pairs']:>6} "
              f"{row['cpu_ms']:>8.3f} {row['wall_ms']:>8.3f}")
    print("ratio to accel (same run):")
    for name, row in r["ratio_to_accel"].items():
        if name == "accel":
            continue
        print(f"{name:<11} {row['samples']:>8.2f} {row['bytes']:>8.2f} {row['label_pairs']:>6.2f} "
              f"{row['cpu_ms']:>8.2f} {row['wall_ms']:>8.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--profile", default="dgx-h100")
    parser.add_argument("--scrapes", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--pods", type=int, default=1, help="containers holding each device in +pods (default 1)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    for name in ("scrapes", "pods"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    if args.warmup < 0:
        parser.error("--warmup must not be negative")
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        print("exporter labels: skipped (prometheus_client is not installed: pip install 'accel-sdk[exporter]')")
        return 0
    result = measure(args.profile, args.scrapes, args.warmup, args.pods)
    if args.json:
        json.dump(result, sys.stdout, indent=2)
        print()
    else:
        print_result(result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
