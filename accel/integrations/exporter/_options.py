"""From ``accel exporter``'s parsed options to what the collector and the ``rules`` action need.

``accel exporter --labels dcgm --pod-resources-socket PATH --hpc-job-mapping-dir DIR`` and
``accel exporter rules --dcgm``: the server calls :func:`collector_options` when it builds the
:class:`~accel.integrations.exporter.AccelCollector` and :func:`rules_text` for the ``rules`` action, so the
options are checked (a bad value is a :class:`~accel.errors.ConfigError` naming the option) before
anything listens.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ...errors import ConfigError
from ._attribution import Attribution, HpcJobMapping, ServeJobs

__all__ = ["collector_options", "rules_text"]


def _float(args: argparse.Namespace, name: str, default: float) -> float:
    value = getattr(args, name, default)
    return default if value is None else float(value)


def collector_options(args: argparse.Namespace) -> dict[str, Any]:
    """``labels`` and ``attribution`` for :class:`~accel.integrations.exporter.AccelCollector` (``**`` them in).

    The PodResources client is built here but connects on the first scrape; a socket that is not
    there yet (the kubelet restarting) is a scrape-time ``accel_attribution_up 0``, not a refusal
    to start.
    """
    labels = getattr(args, "labels", "accel") or "accel"
    if labels not in ("accel", "dcgm"):
        raise ConfigError(f"--labels {labels!r}: use accel or dcgm")
    interval = _float(args, "attribution_interval", 10.0)
    timeout = _float(args, "attribution_timeout", 2.0)
    if not interval >= 0:
        raise ConfigError(f"--attribution-interval must be zero or more seconds, got {interval!r}")
    if not timeout > 0:
        raise ConfigError(f"--attribution-timeout must be more than 0 seconds, got {timeout!r}")
    socket = getattr(args, "pod_resources_socket", None)
    directory = getattr(args, "hpc_job_mapping_dir", None)
    if socket == "":
        raise ConfigError("--pod-resources-socket is empty")
    if directory == "":
        raise ConfigError("--hpc-job-mapping-dir is empty")
    serve_file = getattr(args, "accel_serve_attribution", None)
    if serve_file == "":
        raise ConfigError("--accel-serve-attribution is empty")
    attribution = None
    if socket or directory or serve_file:
        pods = None
        if socket:
            from ..k8s._podresources import PodResourcesClient, PodResourcesError, require_grpc

            try:
                require_grpc()
            except PodResourcesError as exc:
                raise ConfigError(f"--pod-resources-socket: {exc}") from exc
            pods = PodResourcesClient(socket, timeout_s=timeout)
        jobs = HpcJobMapping(directory) if directory else None
        serve = ServeJobs(serve_file) if serve_file else None
        attribution = Attribution(pods=pods, jobs=jobs, serve=serve, ttl_s=interval, warn=_warn)
    return {"labels": labels, "attribution": attribution}


def _warn(line: str) -> None:
    print(f"accel: warning: {line}", file=sys.stderr, flush=True)


def rules_text(args: argparse.Namespace) -> str:
    """What ``accel exporter rules`` prints: accel's rules, or with ``--dcgm`` the dcgm-exporter names."""
    if getattr(args, "dcgm", False):
        from ._dcgm import dcgm_rules_yaml

        return dcgm_rules_yaml()
    from ._rules import rules_yaml

    return rules_yaml()
