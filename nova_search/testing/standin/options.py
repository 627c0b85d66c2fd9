"""What a stand-in is started with (``StandinOptions``) and what it saw (``StandinStats``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class StandinOptions:
    model: str = "standin"
    #: output tokens per streamed chunk (several mimic speculative decoding); the last chunk may carry fewer
    tokens_per_chunk: int = 1
    #: delay from the request's arrival to the first chunk (the headers go out at once, as in vLLM)
    ttft_s: float = 0.0
    #: delay between chunks
    itl_s: float = 0.0
    #: a known saturation point: with more than this many requests in flight when a request arrives,
    #: its TTFT and ITL stretch in proportion (in flight / knee), as a compute-bound batch does; 0: never
    knee_in_flight: int = 0
    #: send cumulative ``usage`` in every chunk when the request asks for ``continuous_usage_stats``
    #: (as vLLM does); False: only the final usage chunk
    running_usage: bool = True
    #: when set, ``/v1/*`` needs ``Authorization: Bearer <api_key>`` (401 otherwise), as vLLM's --api-key
    api_key: str | None = None
    #: every Nth completion request (counted from 1) gets HTTP 500; 0: never
    error_every: int = 0
    #: every Nth completion request has its connection closed after ``drop_after_chunks`` chunks; 0: never
    drop_every: int = 0
    drop_after_chunks: int = 1
    #: tokens drafted per decode step for the spec-decode counters; None: ``tokens_per_chunk``.
    #: A chunk of k tokens counts as one draft with k - 1 tokens accepted.
    num_spec_tokens: int | None = None
    #: KV cache size in tokens; ``vllm:kv_cache_usage_perc`` is the in-flight tokens' share of it
    kv_capacity_tokens: int = 65_536
    version: str = "0.0.0+standin"
    #: a tokenizer.json that counts text prompt tokens exactly; None: whitespace-separated words
    tokenizer: str | None = None
    #: keep every request's prompt in ``stats().prompts`` (``{"endpoint", "prompt" | "messages",
    #: "max_tokens"}``)
    record_prompts: bool = False
    #: serve vLLM's sleep-mode endpoints (``POST /sleep``, ``POST /wake_up``, ``GET /is_sleeping``);
    #: while asleep, completions get HTTP 503. ``on_sleep(event)`` is called with "sleep" / "wake"
    sleep_mode: bool = False
    on_sleep: Any = None
    #: added to every generated token's id (its word too): a server whose greedy output differs from the
    #: others', as vLLM's does under synthetic acceptance (drafted tokens accepted by a chosen profile)
    token_shift: int = 0

    def __post_init__(self) -> None:
        if self.tokens_per_chunk < 1:
            raise ValueError("tokens_per_chunk must be >= 1")
        if self.ttft_s < 0 or self.itl_s < 0:
            raise ValueError("ttft_s and itl_s must be >= 0")
        if self.knee_in_flight < 0:
            raise ValueError("knee_in_flight must be >= 0")


@dataclass
class StandinStats:
    """What the stand-in saw. ``arrivals`` are ``time.perf_counter()`` times (the same clock as
    nova's records when the stand-in runs in the test's process)."""

    requests: int = 0  # completion and chat requests past the API-key check
    chat_requests: int = 0  # of which chat
    unauthorized: int = 0
    errors: int = 0  # HTTP 500 sent
    dropped: int = 0  # connections closed mid-stream
    completed: int = 0  # streams (or JSON responses) sent in full
    in_flight: int = 0
    max_in_flight: int = 0
    tokens_served: int = 0
    metrics_reads: int = 0
    arrivals: list[float] = field(default_factory=list)
    #: when each /metrics read arrived (``time.perf_counter()``)
    metrics_times: list[float] = field(default_factory=list)
    #: with ``record_prompts``: what each request asked, in arrival order
    prompts: list[dict[str, object]] = field(default_factory=list)
    #: with ``sleep_mode``: "sleep" / "wake", in order
    switches: list[str] = field(default_factory=list)
