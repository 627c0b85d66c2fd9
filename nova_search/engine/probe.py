"""Reads of a running engine's HTTP surface: ``/metrics`` (Prometheus text, parsed with
prometheus_client's parser) and ``/version``. Pure parsing is separate from the HTTP calls."""

from __future__ import annotations

import time

import httpx
from prometheus_client.parser import text_string_to_metric_families

from nova_search import redact
from nova_search.measure.records import EngineSample

#: the engine metrics worth keeping (sample names; counters carry the _total suffix)
KEPT = (
    "vllm:kv_cache_usage_perc",
    "vllm:gpu_cache_usage_perc",
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:num_preemptions_total",
    "vllm:prefix_cache_queries_total",
    "vllm:prefix_cache_hits_total",
    "vllm:gpu_prefix_cache_queries_total",
    "vllm:gpu_prefix_cache_hits_total",
    "vllm:spec_decode_num_drafts_total",
    "vllm:spec_decode_num_draft_tokens_total",
    "vllm:spec_decode_num_accepted_tokens_total",
    "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
)
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"


def parse_metrics(text: str, at: float | None = None) -> EngineSample:
    """Sum each kept sample over its label sets (engines, models); per-position acceptance by position."""
    values: dict[str, float] = {}
    per_pos: dict[int, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == PER_POS and "position" in s.labels:
                pos = int(s.labels["position"])
                per_pos[pos] = per_pos.get(pos, 0.0) + s.value
            elif s.name in KEPT:
                values[s.name] = values.get(s.name, 0.0) + s.value
    return EngineSample(
        time=time.perf_counter() if at is None else at, values=values, accepted_per_pos=per_pos
    )


#: the longest engine version kept (vLLM's are like 0.26.0+cu129 or 0.11.1rc2.dev96+g1234567)
MAX_VERSION = 100


def read_version(base_url: str, api_key: str | None = None, timeout: float = 5.0) -> str | None:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        r = httpx.get(f"{base_url}/version", headers=headers, timeout=timeout)
        r.raise_for_status()
        version = r.json().get("version")
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    # what the engine reports goes into headers, exports and a 255-character column: one line, bounded
    return None if version is None else redact.one_line(str(version))[:MAX_VERSION]
