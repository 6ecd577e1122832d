"""Engine load from vLLM's and SGLang's Prometheus pages (old and new names)."""

from __future__ import annotations

import pytest

from accel.router import parse_engine_metrics

VLLM_NEW = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 1.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 2.0
vllm:num_requests_waiting{engine="1",model_name="m"} 0.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.5
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.25
# HELP vllm:gpu_cache_usage_perc DEPRECATED
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{engine="0",model_name="m"} 0.9
# HELP vllm:prefix_cache_queries_total Prefix cache queries.
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 1000.0
# HELP vllm:prefix_cache_hits_total Prefix cache hits.
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 400.0
"""

VLLM_OLD = """# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m"} 7.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="m"} 1.0
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="m"} 0.75
# TYPE vllm:gpu_prefix_cache_hits_total counter
vllm:gpu_prefix_cache_hits_total{model_name="m"} 16.0
"""

SGLANG = """# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="qwen"} 5.0
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="qwen"} 4.0
# HELP sglang:token_usage The token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="qwen"} 0.33
"""


def test_vllm_new_names_are_read_first_and_engines_summed() -> None:
    load = parse_engine_metrics(VLLM_NEW)
    assert load.kind == "vllm"
    assert (load.running, load.waiting, load.outstanding) == (4.0, 2.0, 6.0)
    assert load.kv_usage == pytest.approx(0.375)  # the new name wins over the deprecated one; mean of engines
    assert (load.prefix_queries_tokens, load.prefix_hits_tokens) == (1000.0, 400.0)


def test_vllm_old_names_are_the_fallback() -> None:
    load = parse_engine_metrics(VLLM_OLD)
    assert (load.kind, load.running, load.waiting, load.kv_usage) == ("vllm", 7.0, 1.0, 0.75)
    assert load.prefix_hits_tokens == 16.0 and load.prefix_queries_tokens is None  # absent: unknown, not 0


def test_sglang_names() -> None:
    load = parse_engine_metrics(SGLANG)
    assert (load.kind, load.running, load.waiting, load.kv_usage) == ("sglang", 5.0, 4.0, 0.33)


def test_a_page_without_engine_metrics_is_unknown_and_a_broken_one_raises() -> None:
    load = parse_engine_metrics("# TYPE up gauge\nup 1\n")
    assert load.kind is None and load.outstanding is None
    with pytest.raises(ValueError):
        parse_engine_metrics("vllm:num_requests_running{engine=0 3\n")


def _histogram(name: str, buckets: int, engines: int) -> str:
    lines = [f"# HELP {name} A histogram the router does not read.", f"# TYPE {name} histogram"]
    for e in range(engines):
        for i in range(buckets):
            lines.append(f'{name}_bucket{{engine="{e}",le="{0.01 * 2 ** i}",model_name="m"}} {i * 3}.0')
        lines.append(f'{name}_bucket{{engine="{e}",le="+Inf",model_name="m"}} {buckets * 3}.0')
        lines.append(f'{name}_sum{{engine="{e}",model_name="m"}} 12.5')
        lines.append(f'{name}_count{{engine="{e}",model_name="m"}} 40.0')
    return "\n".join(lines) + "\n"


def test_only_the_names_read_are_parsed_and_the_rest_of_a_page_is_skipped() -> None:
    # a vLLM page is mostly histograms: the answer is the same with them, with a malformed line of a name
    # the router does not read, and with names that only begin like one it reads
    noise = (_histogram("vllm:time_to_first_token_seconds", 20, 2)
             + _histogram("vllm:e2e_request_latency_seconds", 20, 2)
             + "vllm:some_new_metric{engine=broken 1\n"
             + 'vllm:num_requests_running_peak{engine="0",model_name="m"} 99.0\n'
             + 'vllm:num_requests_waiting:rate{engine="0",model_name="m"} 50.0\n')
    page = noise + VLLM_NEW + noise
    assert parse_engine_metrics(page) == parse_engine_metrics(VLLM_NEW)
    assert parse_engine_metrics(noise + SGLANG) == parse_engine_metrics(SGLANG)
    # a malformed line of a name it reads is still an error, wherever it is on the page
    with pytest.raises(ValueError):
        parse_engine_metrics(noise + 'vllm:num_requests_waiting{engine="0" 2\n' + VLLM_NEW)
    # a sample with a timestamp, and one without labels
    load = parse_engine_metrics("vllm:num_requests_running 2 1700000000000\nvllm:num_requests_waiting\t1\n")
    assert (load.running, load.waiting) == (2.0, 1.0)
