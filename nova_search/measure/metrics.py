"""RequestRecords (+ engine samples) -> LevelResult. Pure functions; the definitions docs/metrics.md states.

- TTFT: first output chunk arrival minus send.  E2E: last output chunk minus send.
- TPOT: (E2E - TTFT) / (output_tokens - 1), per request.
- ITL: the gap before each chunk divided by the tokens that chunk carried, one sample per token.
- Output throughput: output tokens of the requests measured in the window / window length, where the
  window runs from the first measured send to the last measured completion (warmup excluded).
- p99.9 (``*_p999_ms``): only from 1000 samples up (``P999_MIN_SAMPLES``); None below, where it
  would be little more than the maximum.
- Goodput: requests that succeeded and met every bound of the SLO (``measure.slo.SLO``) / window length;
  ``goodput_rate`` is their share of the measured requests (failures count as misses). Without SLOs
  every successful request counts, so goodput equals ``request_throughput``.
- Engine figures come from /metrics samples taken during the window; counters are window deltas.
- Client: ``client_cpu_share`` is the busiest client process's CPU seconds / window (1.0 = one core
  busy), ``client_processes`` how many processes drove the level, ``client_bound`` whether the
  busiest one passed the client-bound share (``loadgen.procs``) or a trace replay's sends fell
  behind its schedule (``loadgen.replay``), and ``client_note`` why, and what was done about it.
- Send lag (open loop): each request's send time minus its due time on the schedule, in ms;
  ``send_lag_p50_ms``, ``send_lag_p99_ms`` and ``send_lag_max_ms`` over the window (None when closed).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Protocol

import numpy as np

from nova_search.measure.records import EngineSample, LevelRun, RequestRecord

PERCENTILES = (("mean", None), ("p50", 50.0), ("p90", 90.0), ("p95", 95.0), ("p99", 99.0))
#: spread statistics of each latency (numpy: ``std`` is the population standard deviation, as in
#: ``vllm bench serve``)
SPREAD = ("std", "min", "max")
LATENCIES = ("ttft", "tpot", "itl", "e2e")
#: p99.9 is reported only from this many samples up: below it, it is the maximum in all but name
P999_MIN_SAMPLES = 1000


class RequestCheck(Protocol):
    """What goodput counts a request against: ``measure.slo.SLO`` (every bound of the spec's ``slo``)."""

    def met_by(self, r: RequestRecord) -> bool: ...


@dataclass(frozen=True)
class LevelResult:
    """The profile of one concurrency level. Latencies in milliseconds; None when undefined."""

    concurrency: int
    requests: int
    completed: int
    errors: int
    error_rate: float
    duration_s: float
    input_tokens: int
    output_tokens: int
    output_throughput: float
    total_token_throughput: float
    request_throughput: float
    goodput: float | None = None
    goodput_rate: float | None = None
    ttft_mean_ms: float | None = None
    ttft_p50_ms: float | None = None
    ttft_p90_ms: float | None = None
    ttft_p95_ms: float | None = None
    ttft_p99_ms: float | None = None
    ttft_p999_ms: float | None = None
    ttft_std_ms: float | None = None
    ttft_min_ms: float | None = None
    ttft_max_ms: float | None = None
    tpot_mean_ms: float | None = None
    tpot_p50_ms: float | None = None
    tpot_p90_ms: float | None = None
    tpot_p95_ms: float | None = None
    tpot_p99_ms: float | None = None
    tpot_p999_ms: float | None = None
    tpot_std_ms: float | None = None
    tpot_min_ms: float | None = None
    tpot_max_ms: float | None = None
    itl_mean_ms: float | None = None
    itl_p50_ms: float | None = None
    itl_p90_ms: float | None = None
    itl_p95_ms: float | None = None
    itl_p99_ms: float | None = None
    itl_p999_ms: float | None = None
    itl_std_ms: float | None = None
    itl_min_ms: float | None = None
    itl_max_ms: float | None = None
    e2e_mean_ms: float | None = None
    e2e_p50_ms: float | None = None
    e2e_p90_ms: float | None = None
    e2e_p95_ms: float | None = None
    e2e_p99_ms: float | None = None
    e2e_p999_ms: float | None = None
    e2e_std_ms: float | None = None
    e2e_min_ms: float | None = None
    e2e_max_ms: float | None = None
    kv_cache_usage_peak: float | None = None
    kv_cache_usage_mean: float | None = None
    num_running_mean: float | None = None
    num_waiting_mean: float | None = None
    num_waiting_max: float | None = None
    preemptions: float | None = None
    prefix_cache_hit_rate: float | None = None
    spec_acceptance_rate: float | None = None
    spec_mean_acceptance_length: float | None = None
    spec_accepted_per_pos: list[float] = field(default_factory=list)
    client_cpu_share: float | None = None
    first_errors: list[str] = field(default_factory=list)
    client_processes: int | None = None
    #: None: not checked (a result stored before the check existed)
    client_bound: bool | None = None
    client_note: str = ""
    #: open loop (Poisson, a trace replay): how late the client sent requests after their due time
    #: (ms; ``loadgen.replay``); None in a closed loop
    send_lag_p50_ms: float | None = None
    send_lag_p99_ms: float | None = None
    send_lag_max_ms: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LevelResult:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


#: fields of LevelResult that are bookkeeping, not metrics (no column, not an objective)
NOT_METRICS = (
    "concurrency",
    "spec_accepted_per_pos",
    "first_errors",
    "client_processes",
    "client_bound",
    "client_note",
    "send_lag_p50_ms",
    "send_lag_p99_ms",
    "send_lag_max_ms",
)

#: numeric metrics a user may name in objectives and constraints
METRIC_NAMES: tuple[str, ...] = tuple(f.name for f in fields(LevelResult) if f.name not in NOT_METRICS)


#: metrics where lower is better besides the latencies (``*_ms``)
_LOWER_IS_BETTER = frozenset(
    {
        "error_rate",
        "errors",
        "duration_s",
        "preemptions",
        "num_waiting_mean",
        "num_waiting_max",
        # the trial figures of measure.capacity that are better low
        "cost_per_mtok",
        "joules_per_token",
    }
)


def higher_is_better(metric: str) -> bool:
    """The natural direction of a metric: latencies (``*_ms``), errors, preemptions, queue depth, cost
    and energy per token are better low; throughputs, goodput, capacity, acceptance and hit rates high."""
    return not (metric.endswith("_ms") or metric in _LOWER_IS_BETTER)


def _stats(values: list[float], prefix: str) -> dict[str, float | None]:
    names = [n for n, _ in PERCENTILES] + ["p999", *SPREAD]
    if not values:
        return {f"{prefix}_{name}_ms": None for name in names}
    a = np.asarray(values, dtype=float) * 1000.0
    out: dict[str, float | None] = {}
    for name, q in PERCENTILES:
        out[f"{prefix}_{name}_ms"] = float(a.mean() if q is None else np.percentile(a, q))
    out[f"{prefix}_p999_ms"] = float(np.percentile(a, 99.9)) if a.size >= P999_MIN_SAMPLES else None
    out[f"{prefix}_std_ms"] = float(a.std())
    out[f"{prefix}_min_ms"] = float(a.min())
    out[f"{prefix}_max_ms"] = float(a.max())
    return out


def summarize(run: LevelRun, slos: Sequence[RequestCheck] | None = None) -> LevelResult:
    """The LevelResult of one level. ``slos``: what goodput counts a request against (a request is good
    when it meets every one); without them every successful request is good."""
    records = run.records
    ok = [r for r in records if r.success]
    good = sum(1 for r in ok if all(slo.met_by(r) for slo in slos or ()))
    duration = max(run.window_end - run.window_start, 1e-9)
    out_tokens = sum(r.output_tokens for r in ok)
    in_tokens = sum(r.prompt_tokens for r in ok)
    latencies: dict[str, list[float]] = {
        "ttft": [r.ttft for r in ok if r.ttft is not None],
        "tpot": [t for r in ok if (t := r.tpot) is not None],
        "itl": [x for r in ok for x in r.itls()],
        "e2e": [r.e2e for r in ok if r.e2e is not None],
    }
    stats: dict[str, Any] = {}
    for name in LATENCIES:
        stats.update(_stats(latencies[name], name))
    errors = len(records) - len(ok)
    seen_errors: list[str] = []
    for r in records:
        if not r.success and r.error not in seen_errors:
            seen_errors.append(r.error)
    return LevelResult(
        concurrency=run.concurrency,
        requests=len(records),
        completed=len(ok),
        errors=errors,
        error_rate=errors / len(records) if records else 1.0,
        duration_s=duration,
        input_tokens=in_tokens,
        output_tokens=out_tokens,
        output_throughput=out_tokens / duration,
        total_token_throughput=(in_tokens + out_tokens) / duration,
        request_throughput=len(ok) / duration,
        goodput=good / duration,
        goodput_rate=good / len(records) if records else None,
        client_cpu_share=run.busiest_cpu_s / duration if run.client_cpu_s else None,
        first_errors=seen_errors[:3],
        client_processes=run.processes,
        client_bound=run.client_bound,
        client_note=run.client_note,
        **_lag_stats(records),
        **stats,
        **engine_summary(run.engine_samples),
    )


def _lag_stats(records: Sequence[RequestRecord]) -> dict[str, float]:
    lags = [lag for r in records if (lag := r.lag) is not None]
    if not lags:
        return {}
    a = np.asarray(lags, dtype=float) * 1000.0
    return {
        "send_lag_p50_ms": float(np.percentile(a, 50)),
        "send_lag_p99_ms": float(np.percentile(a, 99)),
        "send_lag_max_ms": float(a.max()),
    }


def _delta(samples: tuple[EngineSample, ...], *names: str) -> float | None:
    for name in names:
        if name in samples[0].values and name in samples[-1].values:
            return samples[-1].values[name] - samples[0].values[name]
    return None


def _gauge(samples: tuple[EngineSample, ...], name: str) -> list[float]:
    return [s.values[name] for s in samples if name in s.values]


def engine_summary(samples: tuple[EngineSample, ...]) -> dict[str, Any]:
    """Gauges summarised over the window, counters as window deltas. Empty without two samples."""
    if len(samples) < 2:
        return {}
    out: dict[str, Any] = {}
    kv = _gauge(samples, "vllm:kv_cache_usage_perc") or _gauge(samples, "vllm:gpu_cache_usage_perc")
    if kv:
        out["kv_cache_usage_peak"] = max(kv)
        out["kv_cache_usage_mean"] = float(np.mean(kv))
    running = _gauge(samples, "vllm:num_requests_running")
    if running:
        out["num_running_mean"] = float(np.mean(running))
    waiting = _gauge(samples, "vllm:num_requests_waiting")
    if waiting:
        out["num_waiting_mean"] = float(np.mean(waiting))
        out["num_waiting_max"] = max(waiting)
    out["preemptions"] = _delta(samples, "vllm:num_preemptions_total")
    queries = _delta(samples, "vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total")
    hits = _delta(samples, "vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total")
    if queries and hits is not None:
        out["prefix_cache_hit_rate"] = hits / queries
    drafts = _delta(samples, "vllm:spec_decode_num_drafts_total")
    draft_tokens = _delta(samples, "vllm:spec_decode_num_draft_tokens_total")
    accepted = _delta(samples, "vllm:spec_decode_num_accepted_tokens_total")
    if draft_tokens and accepted is not None:
        out["spec_acceptance_rate"] = accepted / draft_tokens
    if drafts and accepted is not None:
        out["spec_mean_acceptance_length"] = 1.0 + accepted / drafts
        first, last = samples[0].accepted_per_pos, samples[-1].accepted_per_pos
        out["spec_accepted_per_pos"] = [(last[p] - first.get(p, 0.0)) / drafts for p in sorted(last)]
    return out


#: the metrics that get a confidence interval when a level is measured in several windows
HEADLINE = (
    "output_throughput",
    "total_token_throughput",
    "request_throughput",
    "goodput",
    "ttft_p50_ms",
    "ttft_p99_ms",
    "tpot_p50_ms",
    "tpot_p99_ms",
    "itl_p50_ms",
    "e2e_p50_ms",
    "e2e_p99_ms",
)
_SUMMED = ("requests", "completed", "errors", "input_tokens", "output_tokens", "duration_s")


def combine_repeats(results: Sequence[LevelResult]) -> LevelResult:
    """One level measured in several windows -> its LevelResult: counts and durations summed, error
    rate over all requests, every other figure the median of the windows (None where all are None)."""
    if len(results) == 1:
        return results[0]
    first = results[0]
    values: dict[str, Any] = {"concurrency": first.concurrency}
    for f in fields(LevelResult):
        name = f.name
        if name == "concurrency":
            continue
        column = [getattr(r, name) for r in results]
        if name in _SUMMED:
            values[name] = sum(column)
        elif name == "first_errors":
            values[name] = list(dict.fromkeys(e for r in results for e in r.first_errors))[:3]
        elif name == "send_lag_max_ms":
            present_lag = [v for v in column if v is not None]
            values[name] = max(present_lag) if present_lag else None
        elif name == "client_processes":
            present_n = [v for v in column if v is not None]
            values[name] = max(present_n) if present_n else None
        elif name == "client_bound":
            # one client-bound window makes the level client-bound
            values[name] = None if all(v is None for v in column) else any(column)
        elif name == "client_note":
            values[name] = "; ".join(dict.fromkeys(v for v in column if v))
        elif name == "spec_accepted_per_pos":
            rows = [c for c in column if c]
            width = min((len(c) for c in rows), default=0)
            values[name] = [float(np.median([c[i] for c in rows])) for i in range(width)]
        else:
            present = [v for v in column if v is not None]
            values[name] = float(np.median(present)) if present else None
    values["error_rate"] = values["errors"] / values["requests"] if values["requests"] else 1.0
    return LevelResult(**values)
