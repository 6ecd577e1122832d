"""An engine's load from its Prometheus endpoint: vLLM's and SGLang's metric names.

Parsed with ``prometheus_client``'s text parser.  Names (wire-facts.md sections 1 and 3):

========================  =================================  ==============================
signal                    vLLM                               SGLang
========================  =================================  ==============================
running requests          ``vllm:num_requests_running``      ``sglang:num_running_reqs``
waiting requests          ``vllm:num_requests_waiting``      ``sglang:num_queue_reqs``
KV-cache use (0..1)       ``vllm:kv_cache_usage_perc``       ``sglang:token_usage``
                          (from 0.9.2), else the older
                          ``vllm:gpu_cache_usage_perc``
prefix-cache tokens       ``vllm:prefix_cache_{queries,hits}_total``, else ``vllm:gpu_prefix_cache_*``
========================  =================================  ==============================

Series of several engines behind one endpoint (the ``engine`` label, data parallel ranks) are
summed for request counts and averaged for KV use.  A signal the page does not carry is
``None`` (unknown), never 0; a page with neither vLLM's nor SGLang's names is ``kind=None``.

Only the sample lines of the names above reach the parser: one regular-expression pass (in C)
picks them out of the page first.  A real engine's page is mostly histograms the router never
reads (vLLM's time-to-first-token, inter-token and end-to-end latency buckets, one series per
bucket and label set); parsing all of it in Python on the monitor's thread held the interpreter
lock that every proxied request needs (see ``benchmarks/router/README.md``).  A malformed line
of a name the router reads is still an error; one of a name it does not read is not looked at.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

__all__ = ["EngineLoad", "parse_engine_metrics"]


@dataclass(frozen=True)
class EngineLoad:
    """What one scrape of an engine said; ``None``: the page did not carry it."""

    kind: str | None
    running: float | None
    waiting: float | None
    kv_usage: float | None
    prefix_queries_tokens: float | None = None
    prefix_hits_tokens: float | None = None

    @property
    def outstanding(self) -> float | None:
        if self.running is None and self.waiting is None:
            return None
        return (self.running or 0.0) + (self.waiting or 0.0)


_VLLM = {
    "running": ("vllm:num_requests_running",),
    "waiting": ("vllm:num_requests_waiting",),
    "kv_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    "queries": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
    "hits": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
}
_SGLANG = {
    "running": ("sglang:num_running_reqs",),
    "waiting": ("sglang:num_queue_reqs",),
    "kv_usage": ("sglang:token_usage",),
    "queries": (),
    "hits": (),
}


_WANTED = sorted({n for table in (_VLLM, _SGLANG) for names in table.values() for n in names}, key=len, reverse=True)
# A sample line of a wanted name: the name, then its labels or the blank before its value (so that
# vllm:num_requests_running never picks up vllm:num_requests_running_foo).
_WANTED_LINES = re.compile(r"^(?:" + "|".join(re.escape(n) for n in _WANTED) + r")[{ \t].*$", re.MULTILINE)


def wanted_lines(text: str) -> str:
    """The sample lines of the names :func:`parse_engine_metrics` reads, without comments (a sample
    parses the same without its family's ``# TYPE``)."""
    return "\n".join(_WANTED_LINES.findall(text)) + "\n"


def parse_engine_metrics(text: str) -> EngineLoad:
    """The load an engine's ``/metrics`` page reports.  Raises ``ValueError`` when a line of a name
    it reads is malformed (lines of other names are skipped unparsed, see the module doc)."""
    from prometheus_client.parser import text_string_to_metric_families

    values: dict[str, list[float]] = defaultdict(list)
    for family in text_string_to_metric_families(wanted_lines(text)):
        for sample in family.samples:
            values[sample.name].append(float(sample.value))

    def first(names: tuple[str, ...], how: str) -> float | None:
        for name in names:
            got = values.get(name)
            if got:
                return sum(got) / len(got) if how == "mean" else sum(got)
        return None

    for kind, names in (("vllm", _VLLM), ("sglang", _SGLANG)):
        running = first(names["running"], "sum")
        waiting = first(names["waiting"], "sum")
        kv = first(names["kv_usage"], "mean")
        if running is None and waiting is None and kv is None:
            continue
        return EngineLoad(kind, running, waiting, kv, first(names["queries"], "sum"), first(names["hits"], "sum"))
    return EngineLoad(None, None, None, None)
