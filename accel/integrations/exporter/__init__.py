"""accel as a Prometheus exporter: one snapshot of every backend per scrape.

An integration (DESIGN.md section 1: the outer ring, beside the CLI); the old import path
``accel.exporter`` names the same objects.

    $ accel exporter --sim dgx-h100            # http://127.0.0.1:10400/metrics
    $ accel exporter rules > accel-rules.yml   # alerting and recording rules
    $ accel exporter rules --dcgm > dcgm.yml   # dcgm-exporter's names, units and labels
    $ accel exporter --labels dcgm --pod-resources-socket /var/lib/kubelet/pod-resources/kubelet.sock

In Python::

    from accel.integrations.exporter import AccelCollector, SnapshotSource
    source = SnapshotSource(accel.discover(), min_interval_s=1.0)
    registry = prometheus_client.CollectorRegistry()
    registry.register(AccelCollector(source))

Metric families are in base units with the model's names (``accel_memory_used_bytes``,
``accel_power_watts``, ``accel_utilization_ratio``...); a value the model does not know is an
absent sample, never 0.  The collector needs ``prometheus_client`` (extra ``[exporter]``);
:mod:`accel.integrations.exporter` imports it only when the collector is used, so ``accel exporter rules``
and the snapshot machinery work without it.  ``docs/exporter.md`` has the families, the
mapping to dcgm-exporter, AMD device-metrics-exporter and HAMi names, dcgm-exporter's labels and
names (:data:`DCGM_FIELDS`), who uses each device (:class:`Attribution`: kubelet PodResources,
Slurm job mapping), and the rules.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._attribution import Attribution, HpcJobMapping
    from ._collector import AccelCollector
    from ._dcgm import DCGM_FIELDS, DCGM_RULE_GROUPS, DcgmField, dcgm_rules_yaml
    from ._families import COMMON_FAMILIES, FAMILIES, Family, FieldSelection, parse_fields
    from ._rules import RULE_GROUPS, rules_yaml
    from ._snapshot import BackendRead, Snapshot, SnapshotSource

__all__ = [
    "COMMON_FAMILIES",
    "DCGM_FIELDS",
    "DCGM_RULE_GROUPS",
    "DEFAULT_LISTEN",
    "DEFAULT_PORT",
    "FAMILIES",
    "RULE_GROUPS",
    "AccelCollector",
    "Attribution",
    "BackendRead",
    "DcgmField",
    "Family",
    "FieldSelection",
    "HpcJobMapping",
    "Snapshot",
    "SnapshotSource",
    "dcgm_rules_yaml",
    "parse_fields",
    "rules_yaml",
]

#: The exporter binds to loopback unless told otherwise.
DEFAULT_LISTEN = "127.0.0.1"
#: accel's own default port: outside the Prometheus wiki's exhausted 9100-9999 exporter range and
#: not dcgm-exporter's 9400 (both often run on one NVIDIA node); see docs/exporter.md.
DEFAULT_PORT = 10400


#: Where each lazily imported name lives (the CLI builds its parser without loading any of them).
_LAZY = {
    "Attribution": "_attribution",
    "HpcJobMapping": "_attribution",
    "AccelCollector": "_collector",
    "DCGM_FIELDS": "_dcgm",
    "DCGM_RULE_GROUPS": "_dcgm",
    "DcgmField": "_dcgm",
    "dcgm_rules_yaml": "_dcgm",
    "COMMON_FAMILIES": "_families",
    "FAMILIES": "_families",
    "Family": "_families",
    "FieldSelection": "_families",
    "parse_fields": "_families",
    "RULE_GROUPS": "_rules",
    "rules_yaml": "_rules",
    "BackendRead": "_snapshot",
    "Snapshot": "_snapshot",
    "SnapshotSource": "_snapshot",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(name)
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
