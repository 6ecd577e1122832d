"""A node-feature-discovery feature file: node labels for clusters without DRA.

nfd-worker's ``local`` source reads every file under
``/etc/kubernetes/node-feature-discovery/features.d/``: one ``label=value`` per line, ``#``
comments, and an optional ``# +expiry-time=<RFC3339>`` header after which the labels are dropped
(so a node whose accel stopped writing loses them).  Labels are ``<domain>/<vendor>.<what>``:
``count``, ``model`` (the most common), ``memory`` (bytes, the smallest device), ``partitions``,
``link-domains`` (how many), ``link-domain-size`` (the largest) and ``link-type``; plus
``<domain>/present=true``.  Names and values follow Kubernetes' label syntax (checked by
:func:`valid_label`); values that do not fit are reduced to the allowed characters.
nfd-master (v0.13 and later) accepts any label namespace except ``kubernetes.io`` ones unless
its ``denyLabelNs`` says otherwise.
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import UTC, datetime, timedelta

from ...errors import ConfigError
from ...model import HostInventory
from ._dra import DEFAULT_DOMAIN

__all__ = ["FEATURES_DIR", "nfd_features", "valid_label"]

FEATURES_DIR = "/etc/kubernetes/node-feature-discovery/features.d/"
_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def valid_label(key: str, value: str) -> bool:
    """Kubernetes label syntax: ``[prefix/]name`` (prefix a DNS subdomain of at most 253, name at
    most 63 alphanumerics with ``-_.`` inside) and a value of at most 63 of the same (or empty)."""
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _PREFIX.match(prefix)):
        return False
    return bool(_NAME.match(name)) and bool(_VALUE.match(value))


def _value(text: str) -> str:
    out = re.sub(r"[^A-Za-z0-9_.-]+", "-", text)[:63]
    return re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", out)


def nfd_features(
    inv: HostInventory,
    *,
    domain: str = DEFAULT_DOMAIN,
    now: datetime | None = None,
    ttl: timedelta = timedelta(hours=1),
) -> str:
    """The feature file's text for ``inv``, expiring ``ttl`` after ``now`` (UTC)."""
    if not _PREFIX.match(domain) or len(domain) > 253:
        raise ConfigError(f"label domain must be a DNS subdomain, got {domain!r}")
    if ttl <= timedelta(0):
        raise ConfigError(f"expiry must be in the future, got a ttl of {ttl}")
    expiry = ((now or datetime.now(UTC)).astimezone(UTC) + ttl).replace(microsecond=0)
    lines = [
        f"# +expiry-time={expiry.strftime('%Y-%m-%dT%H:%M:%SZ')}",
        f"# accel node features for node-feature-discovery's local source ({FEATURES_DIR})",
    ]
    labels: dict[str, str] = {f"{domain}/present": "true" if inv.devices else "false"}
    for vendor in sorted({d.vendor for d in inv.devices}):
        devs = [d for d in inv.devices if d.vendor == vendor]
        key = f"{domain}/{vendor}"
        labels[f"{key}.count"] = str(len(devs))
        labels[f"{key}.model"] = _value(Counter(d.model for d in devs).most_common(1)[0][0])
        mems = [d.memory_total_bytes for d in devs if d.memory_total_bytes is not None]
        if mems:
            labels[f"{key}.memory"] = str(min(mems))
        ids = {d.id for d in devs}
        parts = sum(1 for p in inv.partitions if p.parent_id in ids)
        if parts:
            labels[f"{key}.partitions"] = str(parts)
        domains = {dom.id: dom for d in devs for dom in inv.domains_of(d.id)}
        if domains:
            labels[f"{key}.link-domains"] = str(len(domains))
            best = max(domains.values(), key=lambda dom: (dom.size, dom.id))
            labels[f"{key}.link-domain-size"] = str(best.size)
            labels[f"{key}.link-type"] = _value(best.kind.value)
    for k, v in labels.items():
        if not valid_label(k, v):
            raise ConfigError(f"NFD label {k}={v} does not follow the Kubernetes label syntax")
        lines.append(f"{k}={v}")
    return "\n".join(lines) + "\n"
