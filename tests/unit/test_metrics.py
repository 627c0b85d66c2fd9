"""RequestRecords and engine samples -> LevelResult, by the definitions the README states."""

from __future__ import annotations

import numpy as np
import pytest

from nova_search.engine.probe import parse_metrics
from nova_search.measure.metrics import METRIC_NAMES, LevelResult, engine_summary, summarize
from nova_search.measure.records import EngineSample, LevelRun, RequestRecord
from nova_search.measure.slo import SLO, Bound


def ok(send: float, chunks: list[tuple[float, int]], prompt: int = 10) -> RequestRecord:
    times = tuple(t for t, _ in chunks)
    tokens = tuple(n for _, n in chunks)
    return RequestRecord(
        send_time=send,
        end_time=times[-1] + 0.01,
        success=True,
        prompt_tokens=prompt,
        output_tokens=sum(tokens),
        chunk_times=times,
        chunk_tokens=tokens,
    )


def failed(send: float, error: str, chunks: list[tuple[float, int]] | None = None) -> RequestRecord:
    chunks = chunks or []
    return RequestRecord(
        send_time=send,
        end_time=send + 0.2,
        success=False,
        prompt_tokens=10,
        output_tokens=sum(n for _, n in chunks),
        chunk_times=tuple(t for t, _ in chunks),
        chunk_tokens=tuple(n for _, n in chunks),
        error=error,
        status_code=500,
    )


# one token per chunk: TTFT 0.1, E2E 0.4, TPOT 0.1, ITL [0.1, 0.1, 0.1]
R1 = ok(0.0, [(0.1, 1), (0.2, 1), (0.3, 1), (0.4, 1)], prompt=10)
# speculative: 1 + 3 + 2 tokens. TTFT 0.2, E2E 0.6, TPOT 0.4 / 5 = 0.08, ITL [0.1]*3 + [0.05]*2
R2 = ok(1.0, [(1.2, 1), (1.5, 3), (1.6, 2)], prompt=20)
# a failed request that did stream a token before dying: excluded from every latency and token count
R3 = failed(0.5, "HTTP 500: boom", [(0.51, 1)])


# ---------------------------------------------------------------- per-request definitions


def test_request_record_definitions() -> None:
    assert R1.ttft == pytest.approx(0.1)
    assert R1.e2e == pytest.approx(0.4)
    assert R1.tpot == pytest.approx(0.1)
    assert R1.itls() == pytest.approx([0.1, 0.1, 0.1])


def test_itl_divides_multi_token_chunks() -> None:
    assert R2.ttft == pytest.approx(0.2)
    assert R2.e2e == pytest.approx(0.6)
    assert R2.tpot == pytest.approx(0.4 / 5)
    itls = R2.itls()
    # one sample per token after the first chunk: 3 + 2
    assert len(itls) == R2.output_tokens - R2.chunk_tokens[0] == 5
    assert itls == pytest.approx([0.1, 0.1, 0.1, 0.05, 0.05])
    # the ITLs add up to the decode time
    assert sum(itls) == pytest.approx(R2.chunk_times[-1] - R2.chunk_times[0])


def test_tpot_and_itl_undefined_for_one_token() -> None:
    r = ok(0.0, [(0.3, 1)])
    assert r.ttft == pytest.approx(0.3)
    assert r.e2e == pytest.approx(0.3)
    assert r.tpot is None
    assert r.itls() == []


def test_no_chunks_means_no_latencies() -> None:
    r = RequestRecord(send_time=0.0, end_time=1.0, success=False, error="timeout")
    assert r.ttft is None and r.e2e is None and r.tpot is None and r.itls() == []


def test_single_chunk_with_many_tokens() -> None:
    # the whole output in one chunk: TPOT is 0 (no decode gap), no ITL samples
    r = ok(0.0, [(0.5, 4)])
    assert r.tpot == 0.0
    assert r.itls() == []


# ---------------------------------------------------------------- summarize


def run_of(*records: RequestRecord, start: float = 0.0, end: float = 2.0, **kw: object) -> LevelRun:
    return LevelRun(concurrency=4, window_start=start, window_end=end, records=records, **kw)  # type: ignore[arg-type]


def test_summarize_counts_and_throughput() -> None:
    res = summarize(run_of(R1, R2, R3))
    assert res.concurrency == 4
    assert res.requests == 3
    assert res.completed == 2
    assert res.errors == 1
    assert res.error_rate == pytest.approx(1 / 3)
    assert res.duration_s == pytest.approx(2.0)
    assert res.output_tokens == 4 + 6  # R3's token is not counted
    assert res.input_tokens == 10 + 20
    assert res.output_throughput == pytest.approx(10 / 2.0)
    assert res.total_token_throughput == pytest.approx(40 / 2.0)
    assert res.request_throughput == pytest.approx(2 / 2.0)
    assert res.first_errors == ["HTTP 500: boom"]


def test_summarize_latencies_exclude_failures() -> None:
    res = summarize(run_of(R1, R2, R3))
    # R3's TTFT would be 10 ms; only R1 (100 ms) and R2 (200 ms) count
    assert res.ttft_mean_ms == pytest.approx(150.0)
    assert res.ttft_p50_ms == pytest.approx(150.0)
    assert res.e2e_mean_ms == pytest.approx((400.0 + 600.0) / 2)
    assert res.tpot_mean_ms == pytest.approx((100.0 + 80.0) / 2)
    itl = [100.0] * 3 + [100.0] * 3 + [50.0] * 2
    assert res.itl_mean_ms == pytest.approx(float(np.mean(itl)))
    assert res.itl_p50_ms == pytest.approx(100.0)


def test_percentiles_match_numpy() -> None:
    rng = np.random.default_rng(7)
    records = []
    for i in range(50):
        send = float(i)
        ttft = float(rng.uniform(0.01, 0.5))
        gaps = rng.uniform(0.005, 0.05, size=5)
        times = [send + ttft, *(send + ttft + np.cumsum(gaps))]
        records.append(ok(send, [(float(t), 1) for t in times]))
    res = summarize(run_of(*records, end=60.0))
    ttfts = np.array([r.ttft for r in records]) * 1000
    e2es = np.array([r.e2e for r in records]) * 1000
    tpots = np.array([r.tpot for r in records]) * 1000
    itls = np.array([x for r in records for x in r.itls()]) * 1000
    for name, arr in (("ttft", ttfts), ("e2e", e2es), ("tpot", tpots), ("itl", itls)):
        assert getattr(res, f"{name}_mean_ms") == pytest.approx(arr.mean())
        for q in (50, 90, 95, 99):
            assert getattr(res, f"{name}_p{q}_ms") == pytest.approx(np.percentile(arr, q)), (
                name,
                q,
            )
        # population std, as numpy's default and vllm bench serve's np.std
        assert getattr(res, f"{name}_std_ms") == pytest.approx(arr.std())
        assert getattr(res, f"{name}_min_ms") == pytest.approx(arr.min())
        assert getattr(res, f"{name}_max_ms") == pytest.approx(arr.max())
    assert len(itls) == 50 * 5
    assert res.ttft_p99_ms >= res.ttft_p90_ms >= res.ttft_p50_ms  # type: ignore[operator]


def test_all_failed_gives_undefined_latencies() -> None:
    res = summarize(run_of(failed(0.0, "HTTP 503"), failed(0.1, "HTTP 503"), failed(0.2, "timeout")))
    assert res.completed == 0
    assert res.error_rate == 1.0
    assert res.output_tokens == 0 and res.output_throughput == 0.0
    for name in ("ttft", "tpot", "itl", "e2e"):
        for stat in ("mean", "p50", "p90", "p99"):
            assert getattr(res, f"{name}_{stat}_ms") is None
    assert res.first_errors == ["HTTP 503", "timeout"]  # de-duplicated, in order


def test_no_records_is_a_full_error_rate() -> None:
    res = summarize(run_of())
    assert res.requests == 0
    assert res.error_rate == 1.0
    assert res.ttft_p99_ms is None


def test_first_errors_capped_at_three() -> None:
    res = summarize(run_of(*(failed(float(i), f"error {i}") for i in range(5)), R1))
    assert res.first_errors == ["error 0", "error 1", "error 2"]
    assert res.errors == 5


def test_zero_length_window_does_not_divide_by_zero() -> None:
    res = summarize(run_of(R1, start=1.0, end=1.0))
    assert res.duration_s > 0
    assert np.isfinite(res.output_throughput)


def test_client_cpu_share() -> None:
    assert summarize(run_of(R1, client_cpu_s=0.5)).client_cpu_share == pytest.approx(0.25)
    assert summarize(run_of(R1)).client_cpu_share is None


def test_level_result_dict_round_trip() -> None:
    res = summarize(run_of(R1, R2, R3))
    d = res.as_dict()
    assert LevelResult.from_dict({**d, "some_future_field": 1}) == res


# ---------------------------------------------------------------- engine_summary


def sample_at(t: float, per_pos: dict[int, float] | None = None, **values: float) -> EngineSample:
    names = {
        "kv": "vllm:kv_cache_usage_perc",
        "running": "vllm:num_requests_running",
        "waiting": "vllm:num_requests_waiting",
        "preempt": "vllm:num_preemptions_total",
        "queries": "vllm:prefix_cache_queries_total",
        "hits": "vllm:prefix_cache_hits_total",
        "drafts": "vllm:spec_decode_num_drafts_total",
        "draft_tokens": "vllm:spec_decode_num_draft_tokens_total",
        "accepted": "vllm:spec_decode_num_accepted_tokens_total",
    }
    return EngineSample(
        time=t, values={names[k]: v for k, v in values.items()}, accepted_per_pos=per_pos or {}
    )


SAMPLES = (
    sample_at(
        0.0,
        {0: 8, 1: 5, 2: 2},
        kv=0.1,
        running=2,
        waiting=0,
        preempt=5,
        queries=100,
        hits=20,
        drafts=10,
        draft_tokens=30,
        accepted=15,
    ),
    sample_at(
        0.5,
        {0: 40, 1: 30, 2: 25},
        kv=0.6,
        running=4,
        waiting=3,
        preempt=7,
        queries=300,
        hits=120,
        drafts=50,
        draft_tokens=150,
        accepted=95,
    ),
    sample_at(
        1.0,
        {0: 90, 1: 62, 2: 43},
        kv=0.35,
        running=3,
        waiting=1,
        preempt=8,
        queries=500,
        hits=220,
        drafts=110,
        draft_tokens=330,
        accepted=195,
    ),
)


def test_engine_summary_gauges() -> None:
    out = engine_summary(SAMPLES)
    assert out["kv_cache_usage_peak"] == pytest.approx(0.6)
    assert out["kv_cache_usage_mean"] == pytest.approx(0.35)
    assert out["num_running_mean"] == pytest.approx(3.0)
    assert out["num_waiting_mean"] == pytest.approx(4 / 3)
    assert out["num_waiting_max"] == 3


def test_engine_summary_counter_deltas() -> None:
    out = engine_summary(SAMPLES)
    assert out["preemptions"] == pytest.approx(3.0)
    assert out["prefix_cache_hit_rate"] == pytest.approx(200 / 400)


def test_engine_summary_speculative() -> None:
    out = engine_summary(SAMPLES)
    # window deltas: drafts 100, draft tokens 300, accepted 180
    assert out["spec_acceptance_rate"] == pytest.approx(180 / 300)
    assert out["spec_mean_acceptance_length"] == pytest.approx(1 + 180 / 100)
    assert out["spec_accepted_per_pos"] == pytest.approx([82 / 100, 57 / 100, 41 / 100])
    # per-position acceptance adds up to the accepted tokens per draft
    assert sum(out["spec_accepted_per_pos"]) == pytest.approx(180 / 100)


def test_engine_summary_per_position_appearing_late() -> None:
    first = sample_at(0.0, {0: 4}, drafts=10, accepted=4)
    last = sample_at(1.0, {0: 14, 1: 6}, drafts=20, accepted=20)
    out = engine_summary((first, last))
    assert out["spec_accepted_per_pos"] == pytest.approx([10 / 10, 6 / 10])
    assert out["spec_mean_acceptance_length"] == pytest.approx(1 + 16 / 10)
    assert "spec_acceptance_rate" not in out  # no draft-token counter


def test_engine_summary_needs_two_samples() -> None:
    assert engine_summary(()) == {}
    assert engine_summary(SAMPLES[:1]) == {}


def test_engine_summary_without_spec_or_prefix_counters() -> None:
    out = engine_summary((sample_at(0.0, kv=0.2), sample_at(1.0, kv=0.4)))
    assert out["kv_cache_usage_peak"] == pytest.approx(0.4)
    assert out["preemptions"] is None
    for key in (
        "prefix_cache_hit_rate",
        "spec_acceptance_rate",
        "spec_mean_acceptance_length",
        "spec_accepted_per_pos",
        "num_waiting_max",
        "num_running_mean",
    ):
        assert key not in out


def test_engine_summary_no_queries_no_hit_rate() -> None:
    out = engine_summary((sample_at(0.0, queries=10, hits=5), sample_at(1.0, queries=10, hits=5)))
    assert "prefix_cache_hit_rate" not in out


def test_engine_summary_no_drafts_in_window() -> None:
    s = sample_at(0.0, drafts=10, draft_tokens=30, accepted=15)
    out = engine_summary((s, sample_at(1.0, drafts=10, draft_tokens=30, accepted=15)))
    assert "spec_acceptance_rate" not in out
    assert "spec_mean_acceptance_length" not in out


def test_engine_summary_falls_back_to_gpu_prefixed_names() -> None:
    a = EngineSample(
        time=0.0,
        values={
            "vllm:gpu_cache_usage_perc": 0.5,
            "vllm:gpu_prefix_cache_queries_total": 10.0,
            "vllm:gpu_prefix_cache_hits_total": 1.0,
        },
    )
    b = EngineSample(
        time=1.0,
        values={
            "vllm:gpu_cache_usage_perc": 0.7,
            "vllm:gpu_prefix_cache_queries_total": 30.0,
            "vllm:gpu_prefix_cache_hits_total": 6.0,
        },
    )
    out = engine_summary((a, b))
    assert out["kv_cache_usage_peak"] == pytest.approx(0.7)
    assert out["kv_cache_usage_mean"] == pytest.approx(0.6)
    assert out["prefix_cache_hit_rate"] == pytest.approx(5 / 20)


def test_summarize_includes_engine_figures() -> None:
    res = summarize(run_of(R1, R2, engine_samples=SAMPLES))
    assert res.kv_cache_usage_peak == pytest.approx(0.6)
    assert res.spec_acceptance_rate == pytest.approx(0.6)
    assert res.spec_mean_acceptance_length == pytest.approx(2.8)
    assert res.preemptions == pytest.approx(3.0)
    assert len(res.spec_accepted_per_pos) == 3


# ---------------------------------------------------------------- parse_metrics


def prometheus_text(scale: float) -> str:
    """/metrics as vLLM serves it (prometheus_client text format), two engines, counters x scale."""
    return f"""\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",model_name="tiny"}} 3.0
vllm:num_requests_running{{engine="1",model_name="tiny"}} 1.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{engine="0",model_name="tiny"}} 2.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{engine="0",model_name="tiny"}} 0.25
vllm:kv_cache_usage_perc{{engine="1",model_name="tiny"}} 0.125
# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{{engine="0",model_name="tiny"}} {1.0 * scale}
vllm:num_preemptions_total{{engine="1",model_name="tiny"}} {2.0 * scale}
# HELP vllm:num_preemptions_created Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions_created gauge
vllm:num_preemptions_created{{engine="0",model_name="tiny"}} 1.7329e+09
vllm:num_preemptions_created{{engine="1",model_name="tiny"}} 1.7329e+09
# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{{engine="0",model_name="tiny"}} {400.0 * scale}
# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached tokens.
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{{engine="0",model_name="tiny"}} {100.0 * scale}
# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{{engine="0",model_name="tiny"}} {20.0 * scale}
vllm:spec_decode_num_drafts_total{{engine="1",model_name="tiny"}} {20.0 * scale}
# HELP vllm:spec_decode_num_draft_tokens_total Number of draft tokens.
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{{engine="0",model_name="tiny"}} {60.0 * scale}
vllm:spec_decode_num_draft_tokens_total{{engine="1",model_name="tiny"}} {60.0 * scale}
# HELP vllm:spec_decode_num_accepted_tokens_total Number of accepted tokens.
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{{engine="0",model_name="tiny"}} {30.0 * scale}
vllm:spec_decode_num_accepted_tokens_total{{engine="1",model_name="tiny"}} {42.0 * scale}
# HELP vllm:spec_decode_num_accepted_tokens_created Number of accepted tokens.
# TYPE vllm:spec_decode_num_accepted_tokens_created gauge
vllm:spec_decode_num_accepted_tokens_created{{engine="0",model_name="tiny"}} 1.7329e+09
# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position.
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="tiny",position="0"}} {18.0 * scale}
vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="tiny",position="1"}} {12.0 * scale}
vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="1",model_name="tiny",position="0"}} {24.0 * scale}
vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="1",model_name="tiny",position="1"}} {18.0 * scale}
# HELP vllm:spec_decode_num_accepted_tokens_per_pos_created Accepted tokens per draft position.
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_created gauge
vllm:spec_decode_num_accepted_tokens_per_pos_created{{engine="0",model_name="tiny",position="0"}} 1.7329e+09
vllm:spec_decode_num_accepted_tokens_per_pos_created{{engine="0",model_name="tiny",position="1"}} 1.7329e+09
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{{engine="0",le="0.001",model_name="tiny"}} 0.0
vllm:time_to_first_token_seconds_bucket{{engine="0",le="+Inf",model_name="tiny"}} 7.0
vllm:time_to_first_token_seconds_count{{engine="0",model_name="tiny"}} 7.0
vllm:time_to_first_token_seconds_sum{{engine="0",model_name="tiny"}} 0.42
# HELP process_resident_memory_bytes Resident memory size in bytes.
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 4.2e+08
"""  # noqa: E501 - verbatim exposition lines


def test_parse_metrics_sums_label_sets_and_ignores_created() -> None:
    s = parse_metrics(prometheus_text(1.0), at=12.5)
    assert s.time == 12.5
    assert s.values == pytest.approx(
        {
            "vllm:num_requests_running": 4.0,
            "vllm:num_requests_waiting": 2.0,
            "vllm:kv_cache_usage_perc": 0.375,
            "vllm:num_preemptions_total": 3.0,
            "vllm:prefix_cache_queries_total": 400.0,
            "vllm:prefix_cache_hits_total": 100.0,
            "vllm:spec_decode_num_drafts_total": 40.0,
            "vllm:spec_decode_num_draft_tokens_total": 120.0,
            "vllm:spec_decode_num_accepted_tokens_total": 72.0,
        }
    )
    assert s.accepted_per_pos == pytest.approx({0: 42.0, 1: 30.0})
    assert not any("created" in k for k in s.values)
    assert not any("time_to_first_token" in k or "process_" in k for k in s.values)


def test_parse_metrics_default_time_and_empty_text() -> None:
    s = parse_metrics("")
    assert s.values == {} and s.accepted_per_pos == {}
    assert isinstance(s.time, float)


def test_parsed_samples_feed_engine_summary() -> None:
    first = parse_metrics(prometheus_text(1.0), at=0.0)
    last = parse_metrics(prometheus_text(3.0), at=1.0)
    out = engine_summary((first, last))
    # deltas: drafts 80, draft tokens 240, accepted 144, per position 84 and 60
    assert out["spec_acceptance_rate"] == pytest.approx(144 / 240)
    assert out["spec_mean_acceptance_length"] == pytest.approx(1 + 144 / 80)
    assert out["spec_accepted_per_pos"] == pytest.approx([84 / 80, 60 / 80])
    assert out["preemptions"] == pytest.approx(6.0)
    assert out["prefix_cache_hit_rate"] == pytest.approx(0.25)
    assert out["kv_cache_usage_peak"] == pytest.approx(0.375)


# ---------------------------------------------------------------- p99.9


def steady(send: float, *, ttft: float = 0.1, gap: float = 0.01, tokens: int = 3) -> RequestRecord:
    """A request of ``tokens`` one-token chunks: one TTFT/TPOT/E2E sample, tokens - 1 ITL samples."""
    return ok(send, [(send + ttft + i * gap, 1) for i in range(tokens)])


def test_p999_needs_a_thousand_samples() -> None:
    # 999 requests: 999 TTFT/TPOT/E2E samples, but 999 * 2 ITL samples
    res = summarize(run_of(*(steady(float(i)) for i in range(999)), end=1000.0))
    assert res.ttft_p999_ms is None and res.tpot_p999_ms is None and res.e2e_p999_ms is None
    assert res.itl_p999_ms == pytest.approx(10.0)
    assert res.ttft_p99_ms == pytest.approx(100.0)  # the other percentiles do not need as many


def test_p999_matches_numpy_from_a_thousand_samples() -> None:
    rng = np.random.default_rng(11)
    records = [
        steady(float(i), ttft=float(t), gap=float(g))
        for i, (t, g) in enumerate(
            zip(rng.lognormal(-2.0, 0.5, 1000), rng.uniform(0.005, 0.05, 1000), strict=True)
        )
    ]
    res = summarize(run_of(*records, end=1000.0))
    for name, values in (
        ("ttft", [r.ttft for r in records]),
        ("tpot", [r.tpot for r in records]),
        ("e2e", [r.e2e for r in records]),
        ("itl", [x for r in records for x in r.itls()]),
    ):
        arr = np.asarray(values) * 1000.0
        assert getattr(res, f"{name}_p999_ms") == pytest.approx(np.percentile(arr, 99.9)), name
        assert getattr(res, f"{name}_p999_ms") >= getattr(res, f"{name}_p99_ms")


def test_p999_counts_only_successful_requests() -> None:
    records = [steady(float(i)) for i in range(999)] + [failed(0.0, "HTTP 500", [(0.05, 1)])]
    assert summarize(run_of(*records)).ttft_p999_ms is None


def test_p999_is_undefined_without_samples() -> None:
    res = summarize(run_of(failed(0.0, "HTTP 503")))
    assert res.ttft_p999_ms is None and res.itl_p999_ms is None


# ---------------------------------------------------------------- goodput

# TTFT 100 / 200 / 400 ms; TPOT 100 / 80 / 50 ms; E2E 400 / 600 / 500 ms
R4 = ok(2.0, [(2.4, 1), (2.45, 1), (2.5, 1)])  # TTFT 400, TPOT 50, E2E 500
ONE_TOKEN = ok(3.0, [(3.05, 1)])  # TTFT 50, E2E 50, TPOT undefined


def RequestSLO(**bounds: float) -> SLO:  # noqa: N802 - the spec's short fields: bounds at p100
    return SLO(tuple(Bound(k.removesuffix("_ms"), 100.0, v) for k, v in bounds.items()))


def test_goodput_without_slos_is_request_throughput() -> None:
    res = summarize(run_of(R1, R2, R3, R4))
    assert res.goodput == res.request_throughput == pytest.approx(3 / 2.0)
    assert res.goodput_rate == pytest.approx(3 / 4)  # the failure is a miss
    assert summarize(run_of(R1, R2, R3, R4), slos=()).goodput == res.goodput


def test_goodput_counts_requests_meeting_every_slo() -> None:
    run = run_of(R1, R2, R3, R4)
    ttft = summarize(run, slos=(RequestSLO(ttft_ms=250.0),))
    assert ttft.goodput == pytest.approx(2 / 2.0) and ttft.goodput_rate == pytest.approx(2 / 4)
    tpot = summarize(run, slos=(RequestSLO(tpot_ms=90.0),))  # R2 (80) and R4 (50)
    assert tpot.goodput == pytest.approx(2 / 2.0)
    e2e = summarize(run, slos=(RequestSLO(e2e_ms=500.0),))  # bounds are inclusive: R1 and R4
    assert e2e.goodput_rate == pytest.approx(2 / 4)
    both = summarize(run, slos=(RequestSLO(ttft_ms=250.0), RequestSLO(tpot_ms=90.0)))  # only R2
    assert both.goodput == pytest.approx(1 / 2.0) and both.goodput_rate == pytest.approx(1 / 4)
    one_record = summarize(run, slos=(RequestSLO(ttft_ms=250.0, tpot_ms=90.0),))
    assert one_record.goodput == both.goodput
    none_met = summarize(run, slos=(RequestSLO(ttft_ms=1.0),))
    assert none_met.goodput == 0.0 and none_met.goodput_rate == 0.0
    # goodput never changes the other figures
    assert both.request_throughput == ttft.request_throughput == pytest.approx(3 / 2.0)


def test_tpot_bound_does_not_apply_to_one_token_outputs() -> None:
    slo = RequestSLO(ttft_ms=100.0, tpot_ms=1.0)
    assert slo.met_by(ONE_TOKEN)
    assert not RequestSLO(e2e_ms=10.0).met_by(ONE_TOKEN)
    assert not slo.met_by(R1)  # its TPOT is 100 ms


def test_failed_and_chunkless_requests_never_meet_an_slo() -> None:
    assert not RequestSLO(e2e_ms=1e9).met_by(R3)
    assert RequestSLO(e2e_ms=1e9).met_by(R1)
    chunkless = RequestRecord(send_time=0.0, end_time=0.1, success=True)
    assert not RequestSLO(ttft_ms=1000.0).met_by(chunkless)
    assert RequestSLO(tpot_ms=10.0).met_by(chunkless)


def test_goodput_rate_undefined_without_requests() -> None:
    res = summarize(run_of(), slos=(RequestSLO(ttft_ms=100.0),))
    assert res.goodput == 0.0 and res.goodput_rate is None


@pytest.mark.parametrize("kw", [{"ttft_ms": 0.0}, {"tpot_ms": -1.0}, {"e2e_ms": float("nan")}])
def test_request_slo_rejects_non_positive_bounds(kw: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="max_ms"):
        RequestSLO(**kw)


def test_new_fields_are_metrics_and_round_trip() -> None:
    for name in ("goodput", "goodput_rate", "ttft_p999_ms", "tpot_p999_ms", "itl_p999_ms", "e2e_p999_ms"):
        assert name in METRIC_NAMES
    res = summarize(run_of(R1, R2, R3), slos=(RequestSLO(ttft_ms=150.0),))
    assert LevelResult.from_dict(res.as_dict()) == res
    old = {k: v for k, v in res.as_dict().items() if k not in ("goodput", "goodput_rate")}
    assert LevelResult.from_dict(old).goodput is None  # levels stored before these fields


def test_vllm_names_cover_every_statistic_vllm_bench_serve_writes():
    """`bench --json-names vllm`: vLLM's keys (``benchmarks/serve.py``: mean, median, std and the
    asked percentiles of ttft, tpot, itl and e2el), from the same LevelResult fields."""
    from nova_search.trial.bench import vllm_names
    from tests.support.builders import level

    named = vllm_names(level(8, 100.0, 40.0, ttft_std_ms=3.0, ttft_p95_ms=35.0))
    for stat in ("mean", "median", "std", "p90", "p95", "p99", "p99.9"):
        for metric in ("ttft", "tpot", "itl", "e2el"):
            assert f"{stat}_{metric}_ms" in named, (stat, metric)
    assert (named["std_ttft_ms"], named["p95_ttft_ms"], named["p99_ttft_ms"]) == (3.0, 35.0, 40.0)
    assert (named["completed"], named["failed"], named["max_concurrency"]) == (10, 0, 8)
    assert named["output_throughput"] == 100.0 and named["total_output_tokens"] == 200
