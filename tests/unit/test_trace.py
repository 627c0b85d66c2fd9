# ruff: noqa: E501 - the tables of bad lines and specs are one case a line, to be read as tables
"""Trace workloads (loadgen.trace, loadgen.replay, the spec): the three formats read, every kind of bad
line refused with its line number, an empty or out-of-order trace refused, shared hash_ids blocks the
same tokens in every prompt that has them, a window's slice and schedule at a speed, the lateness check,
the trace's summary, the spec's rules, and the committed sample trace is what its script writes."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nova_search.errors import SpecError
from nova_search.loadgen.prompts import prompt_source
from nova_search.loadgen.replay import TraceSource, check_window, flag_late, lateness, read_checked
from nova_search.loadgen.trace import parse_trace, prefix_reuse, read_trace, trace_summary
from nova_search.measure.metrics import METRIC_NAMES, combine_repeats, summarize
from nova_search.measure.records import LevelRun, RequestRecord
from nova_search.spec import ModelSpec, SweepSpec, TraceArrival, WorkloadSpec, parse_spec
from nova_search.testing.specs import minimal_spec_dict
from tests.support import REPO

MODEL = ModelSpec(path="/nonexistent", vocab_size=2048)


def mooncake(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def write(tmp_path: Path, text: str, name: str = "trace.jsonl") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def W(**fields: Any) -> WorkloadSpec:
    return WorkloadSpec.model_validate({"kind": "trace", **fields})


ROWS = [
    {"timestamp": 1000, "input_length": 40, "output_length": 5, "hash_ids": [1, 2, 3]},
    {"timestamp": 1500, "input_length": 33, "output_length": 7, "hash_ids": [1, 2, 9]},
    {"timestamp": 1500, "input_length": 20, "output_length": 1, "hash_ids": [4, 5]},
    {"timestamp": 4000, "input_length": 50, "output_length": 2},
]


# ---------------------------------------------------------------- reading


def test_a_mooncake_trace_is_read_in_seconds_from_its_first_request() -> None:
    t = parse_trace(mooncake(ROWS), "t.jsonl", "mooncake", 16)
    assert t.at.tolist() == [0.0, 0.5, 0.5, 3.0]
    assert t.input_len.tolist() == [40, 33, 20, 50] and t.output_len.tolist() == [5, 7, 1, 2]
    assert t.hash_ids == ((1, 2, 3), (1, 2, 9), (4, 5), ())
    assert t.duration_s == 3.0 and t.rate == pytest.approx(1.0)


def test_the_azure_and_burstgpt_csvs_are_read_by_their_columns() -> None:
    azure = (
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.6805900,4808,10\n"
        "2023-11-16 18:15:50.1805900,3180,8\n"
    )
    t = parse_trace(azure, "az.csv", "azure", 512)
    assert t.at.tolist() == pytest.approx([0.0, 3.5])
    assert t.input_len.tolist() == [4808, 3180] and t.output_len.tolist() == [10, 8]
    assert t.hash_ids == ((), ())
    burst = (
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
        "5,ChatGPT,472,18,490,Conversation log\n"
        "45,ChatGPT,1087,0,1087,Conversation log\n"  # a failed request: no output, left out
        "118,GPT-4,417,217,634,Conversation log\n"
    )
    t = parse_trace(burst, "b.csv", "burstgpt", 512)
    assert t.at.tolist() == [0.0, 113.0] and t.output_len.tolist() == [18, 217] and t.no_output == 1


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"timestamp": 9, "input_length": 3}', "no output_length"),
        (
            '{"timestamp": 9, "input_length": 0, "output_length": 3}',
            "input_length must be a whole number in 1..",
        ),
        ('{"timestamp": 9, "input_length": 2.5, "output_length": 3}', "input_length must be a whole number"),
        ('{"timestamp": 9, "input_length": "x", "output_length": 3}', "input_length 'x' is not a number"),
        ('{"timestamp": -1, "input_length": 4, "output_length": 3}', "timestamp (ms) must be a number >= 0"),
        ('{"timestamp": 9, "input_length": 4, "output_length": -3}', "output_length must be a whole number"),
        ('{"timestamp": 9, "input_length": 4, "output_length": 3, "hash_ids": [1, "a"]}', "hash_ids must be"),
        (
            '{"timestamp": 9, "input_length": 20, "output_length": 3, "hash_ids": [1, 2, 3]}',
            "fills only 2 of",
        ),
    ],
)
def test_a_malformed_mooncake_line_is_refused_with_its_line_number(line: str, says: str) -> None:
    text = mooncake(ROWS[:2]) + "\n" + line + "\n"  # a blank line counts: the bad one is line 4
    with pytest.raises(SpecError) as e:
        parse_trace(text, "t.jsonl", "mooncake", 16)
    assert str(e.value).startswith("workload.path: t.jsonl line 4: ") and says in str(e.value)


@pytest.mark.parametrize(
    ("fmt", "text", "says"),
    [
        ("azure", "TIMESTAMP,ContextTokens\n1,2\n", "line 1: the header has no GeneratedTokens"),
        (
            "azure",
            "TIMESTAMP,ContextTokens,GeneratedTokens\n1,2,3\nyesterday,2,3\n",
            "line 3: TIMESTAMP 'yesterday'",
        ),
        ("azure", "TIMESTAMP,ContextTokens,GeneratedTokens\n1,2,3\n2,2\n", "line 3: has fewer fields"),
        ("burstgpt", "Timestamp,Request tokens,Response tokens\n1,2,3,4\n", "line 2: has more fields"),
        (
            "burstgpt",
            "Timestamp,Request tokens,Response tokens\n1,2,3\n2,,3\n",
            "line 3: Request tokens must be",
        ),
    ],
)
def test_a_malformed_csv_line_is_refused_with_its_line_number(fmt: str, text: str, says: str) -> None:
    with pytest.raises(SpecError) as e:
        parse_trace(text, "t.csv", fmt, 512)
    assert says in str(e.value), str(e.value)


def test_an_out_of_order_trace_is_refused_at_the_line_that_goes_back() -> None:
    rows = [*ROWS[:3], {**ROWS[3], "timestamp": 1200}]
    with pytest.raises(
        SpecError, match=r"t.jsonl line 4: its time \(1.2 s\) is earlier than the line before \(1.5 s\)"
    ):
        parse_trace(mooncake(rows), "t.jsonl", "mooncake", 16)


@pytest.mark.parametrize(
    "text",
    ["", "\n\n", mooncake([{"timestamp": 0, "input_length": 3, "output_length": 0}])],
    ids=["empty", "blank", "no-output"],
)
def test_an_empty_trace_is_refused(text: str) -> None:
    with pytest.raises(SpecError, match="holds no request to replay"):
        parse_trace(text, "t.jsonl", "mooncake", 16)


def test_a_trace_file_that_cannot_be_read_is_refused_naming_the_field(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="workload.path: cannot read"):
        read_trace(str(tmp_path / "missing.jsonl"), "mooncake", 512)
    with pytest.raises(SpecError, match="workload.path: .* is not UTF-8"):
        read_trace(_binary(tmp_path), "mooncake", 512)


def _binary(tmp_path: Path) -> str:
    path = tmp_path / "binary.jsonl"
    path.write_bytes(b"\xff\xfe\x00junk")
    return str(path)


# ---------------------------------------------------------------- prompts


def test_shared_hash_ids_give_identical_prefixes(tmp_path: Path) -> None:
    source = prompt_source(W(path=write(tmp_path, mooncake(ROWS)), block_size=16), MODEL)
    assert isinstance(source, TraceSource)
    it = source.prompts(7)
    a, b, c, d = (next(it) for _ in range(4))
    assert [len(p.token_ids) for p in (a, b, c, d)] == [40, 33, 20, 50]
    assert [p.output_len for p in (a, b, c, d)] == [5, 7, 1, 2]
    assert a.token_ids[:32] == b.token_ids[:32]  # blocks 1 and 2, the same tokens
    assert a.token_ids[32:33] != b.token_ids[32:33]  # block 3 against block 9
    assert c.token_ids[:16] != a.token_ids[:16]  # blocks 4 and 1: nothing shared
    low, high = 3, int(2048 * 0.99)
    assert all(low <= x < high for p in (a, b, c, d) for x in p.token_ids)
    # the same seed draws the same tokens; another seed other ones, with the same sharing
    again = list(zip(range(4), source.prompts(7), strict=False))
    assert [p for _, p in again] == [a, b, c, d]
    a2, b2 = (p for _, p in zip(range(2), source.prompts(8), strict=False))
    assert a2.token_ids[:32] == b2.token_ids[:32] and a2.token_ids[:32] != a.token_ids[:32]


def test_a_block_is_the_same_tokens_wherever_it_recurs_later(tmp_path: Path) -> None:
    rows = [
        {"timestamp": 0, "input_length": 16, "output_length": 1, "hash_ids": [5]},
        *(
            {"timestamp": 10 * k, "input_length": 8, "output_length": 1, "hash_ids": [100 + k]}
            for k in range(1, 6)
        ),
        {"timestamp": 100, "input_length": 30, "output_length": 1, "hash_ids": [5, 6]},
    ]
    source = prompt_source(W(path=write(tmp_path, mooncake(rows)), block_size=16), MODEL)
    prompts = [p for _, p in zip(range(7), source.prompts(3), strict=False)]
    assert prompts[-1].token_ids[:16] == prompts[0].token_ids  # a partial last block: its head


def test_input_len_cuts_a_trace_prompt(tmp_path: Path) -> None:
    source = prompt_source(W(path=write(tmp_path, mooncake(ROWS)), block_size=16, input_len=24), MODEL)
    full = prompt_source(W(path=write(tmp_path, mooncake(ROWS)), block_size=16), MODEL)
    cut, whole = next(source.prompts(1)), next(full.prompts(1))
    assert len(cut.token_ids) == 24 and cut.token_ids == whole.token_ids[:24]


def test_a_window_replays_its_slice_at_the_speed(tmp_path: Path) -> None:
    rows = [{"timestamp": 1000 * k, "input_length": 4, "output_length": 1} for k in range(10)]
    path = write(tmp_path, mooncake(rows))
    source = prompt_source(W(path=path, trace_start_s=2.5), MODEL)
    assert isinstance(source, TraceSource)
    assert source.schedule(1.0, 3, None) == (0.0, 1.0, 2.0)  # from the request at 3 s on
    assert source.schedule(2.0, 3, None) == (0.0, 0.5, 1.0)
    assert source.schedule(0.5, 3, None) == (0.0, 2.0, 4.0)
    assert source.schedule(2.0, None, 1.2) == (0.0, 0.5, 1.0)  # due within 1.2 s at twice the rate
    assert len(source.schedule(1.0, 50, None)) == 7  # never past the trace's end
    # the prompts start at the slice too, and go round the trace when it is used up
    outs = [p for _, p in zip(range(9), source.prompts(0), strict=False)]
    assert len(outs) == 9
    with pytest.raises(SpecError, match="workload.trace_start_s: 99 s is past the last request"):
        prompt_source(W(path=path, trace_start_s=99), MODEL)


def test_a_sweep_whose_windows_the_trace_cannot_fill_is_refused(tmp_path: Path) -> None:
    rows = [{"timestamp": 1000 * k, "input_length": 4, "output_length": 1} for k in range(10)]
    path = write(tmp_path, mooncake(rows))
    trace = read_trace(path, "mooncake", 512)
    w = W(path=path, trace_start_s=5)
    with pytest.raises(SpecError, match="sweep.requests: 6 requests a window, but .* has 5 from"):
        check_window(trace, w, SweepSpec(speeds=[1], requests=6))
    check_window(trace, w, SweepSpec(speeds=[1], requests=5))
    with pytest.raises(
        SpecError, match="sweep.duration_s: a window of 0.5 s at speed 0.5 holds fewer than 2"
    ):
        check_window(trace, w, SweepSpec(speeds=[0.5, 4], duration_s=0.5))
    read_checked(w, SweepSpec(speeds=[1], duration_s=3))


# ---------------------------------------------------------------- keeping to the schedule


def _run(lags_ms: list[float], in_flight: int = 1) -> LevelRun:
    """A window whose k-th request went ``lags_ms[k]`` after its due time, ``in_flight`` out at once."""
    records = []
    for k, lag in enumerate(lags_ms):
        due = float(k // in_flight) * 10.0
        send = due + lag / 1000.0
        records.append(
            RequestRecord(send, send + 1.0, True, 4, 2, (send + 0.5, send + 1.0), (1, 1), due_time=due)
        )
    return LevelRun(100, 0.0, 100.0, tuple(records))


def test_a_window_on_time_is_not_flagged_and_its_lag_is_reported() -> None:
    run = _run([0.5] * 99 + [8.0])
    arrival = TraceArrival(kind="trace", max_in_flight=4, max_lag_ms=10)
    assert lateness(run.records, arrival) is None and flag_late(run, arrival) is run
    level = summarize(run)
    assert level.send_lag_p50_ms == pytest.approx(0.5) and level.send_lag_max_ms == pytest.approx(8.0)
    assert "send_lag_p99_ms" not in METRIC_NAMES  # client bookkeeping: no column, not an objective
    closed = summarize(LevelRun(1, 0.0, 1.0, (RequestRecord(0.0, 1.0, True, 4, 1, (1.0,), (1,)),)))
    assert closed.send_lag_p99_ms is None


def test_a_client_that_falls_behind_is_flagged_with_how_late_and_why() -> None:
    arrival = TraceArrival(kind="trace", max_in_flight=4, max_lag_ms=10)
    late = flag_late(_run([1.0] * 90 + [40.0] * 10), arrival)
    assert late.client_bound is True
    assert "sends fell behind the trace's schedule: p99 lag 40.0 ms" in late.client_note
    assert "10 of 100 requests late, the latest by 40.0 ms" in late.client_note
    assert "the client could not send on time" in late.client_note
    capped = flag_late(_run([50.0] * 8, in_flight=4), arrival)
    assert (
        "the in-flight cap was reached (4 out at once, workload.arrival.max_in_flight 4)"
        in capped.client_note
    )
    level = combine_repeats([summarize(late), summarize(_run([1.0] * 10))])
    assert level.client_bound is True and level.send_lag_max_ms == pytest.approx(40.0)


# ---------------------------------------------------------------- the summary the report shows


def test_the_summary_holds_the_histograms_and_the_prefix_reuse() -> None:
    t = parse_trace(mooncake(ROWS), "t.jsonl", "mooncake", 16)
    # 40 + 33 + 20 + 50 tokens; blocks 1 and 2 of the second request were the first's: 32 tokens
    assert prefix_reuse(t) == pytest.approx(32 / 143)
    s = trace_summary(t, 0.5)
    assert s["requests"] == 4 and s["duration_s"] == 3.0 and s["start_s"] == 0.5 and s["block_size"] == 16
    assert sum(s["arrivals"]["counts"]) == 4 and s["arrivals"]["bin_s"] == pytest.approx(3.0 / 40)
    assert sum(s["input_len"]["counts"]) == 4 and len(s["input_len"]["edges"]) == 41
    assert json.loads(json.dumps(s)) == s  # stored as a study attribute: plain JSON
    csv = parse_trace("TIMESTAMP,ContextTokens,GeneratedTokens\n1,2,3\n", "a.csv", "azure", 512)
    assert prefix_reuse(csv) is None and trace_summary(csv)["rate"] is None


# ---------------------------------------------------------------- the spec


def _spec(tmp_path: Path, **workload: Any) -> dict[str, Any]:
    path = write(tmp_path, mooncake(ROWS))
    return minimal_spec_dict(
        workload={"kind": "trace", "path": path, "block_size": 16, **workload},
        sweep={"speeds": [0.5, 1, 2], "requests": 2},
        objectives=[{"metric": "output_throughput", "direction": "maximize", "at": 200}],
    )


def test_a_trace_spec_replays_by_default_and_its_levels_are_its_speeds(tmp_path: Path) -> None:
    spec = parse_spec(_spec(tmp_path))
    assert isinstance(spec.workload.arrival, TraceArrival) and spec.workload.output_len == "from_data"
    assert spec.sweep.concurrency == [50, 100, 200] and spec.replays_trace
    assert [spec.level_name(c) for c in spec.sweep.concurrency] == ["speed 0.5x", "speed 1x", "speed 2x"]
    assert parse_spec(spec.model_dump(mode="json")) == spec  # a stored spec reads back the same


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"workload": {"kind": "trace"}}, "path: required for kind trace"),
        ({"workload": {"kind": "trace", "path": "x", "output_len": 16}}, "output_len: a trace gives"),
        (
            {"workload": {"kind": "trace", "path": "x", "endpoint": "chat"}},
            "endpoint: kind trace sends token ids",
        ),
        (
            {"workload": {"kind": "trace", "path": "x", "input_len": {"low": 1, "high": 4}}},
            "input_len: for kind trace",
        ),
        ({"workload": {"input_len": 8, "arrival": {"kind": "trace"}}}, "arrival: kind trace replays"),
        ({"workload": {"input_len": 8, "block_size": 16}}, "block_size: only kind trace takes it"),
        (
            {"workload": {"kind": "trace", "path": "x"}, "sweep": {"concurrency": [1], "requests": 2}},
            "sweep.speeds: a trace replay",
        ),
        ({"sweep": {"speeds": [1], "requests": 2}}, "sweep.speeds: only a trace replay"),
        ({"sweep": {"speeds": [0.333], "requests": 2}}, "not a multiple of 0.01"),
        (
            {"sweep": {"speeds": [1, 2], "concurrency": [4], "requests": 2}},
            "concurrency: a trace replay's levels are its speeds",
        ),
    ],
)
def test_a_bad_trace_spec_is_refused_naming_the_field(change: dict[str, Any], says: str) -> None:
    raw = minimal_spec_dict(**change)
    with pytest.raises(SpecError) as e:
        parse_spec(raw)
    assert says in str(e.value), str(e.value)


def test_a_closed_loop_on_a_trace_takes_its_lengths_and_concurrency_levels(tmp_path: Path) -> None:
    raw = _spec(tmp_path, arrival={"kind": "closed"})
    raw["sweep"] = {"concurrency": [1, 2], "requests": 2}
    raw["objectives"] = [{"metric": "output_throughput", "direction": "maximize"}]
    spec = parse_spec(raw)
    assert not spec.replays_trace and spec.level_name(2) == "concurrency 2"


# ---------------------------------------------------------------- the committed sample


def test_the_sample_trace_is_what_its_script_writes_and_fits_the_tiny_model(tmp_path: Path) -> None:
    script = REPO / "scripts" / "make_sample_trace.py"
    loaded = importlib.util.spec_from_file_location("make_sample_trace", script)
    assert loaded is not None and loaded.loader is not None
    module = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(module)
    out = module.write(tmp_path / "sample.jsonl")
    committed = REPO / "studies" / "traces" / "sample-mooncake.jsonl"
    assert out.read_bytes() == committed.read_bytes()
    t = read_trace(str(committed), "mooncake", 64)
    assert 2000 <= len(t) <= 5000
    assert int((t.input_len + t.output_len).max()) <= 2000
    assert prefix_reuse(t) is not None and prefix_reuse(t) > 0.3  # sessions and system prompts share blocks
    gaps = np.diff(t.at)
    assert gaps.std() / gaps.mean() > 1.2  # bursty: more spread than a Poisson process's gaps


def test_a_trace_replay_with_a_capacity_search_is_refused_naming_the_field(tmp_path: Path) -> None:
    """The capacity search bisects concurrency or a Poisson rate; a trace replay's levels are speeds."""
    raw = _spec(tmp_path) | {"slo": {"ttft_ms": 100}, "capacity": {}}
    with pytest.raises(SpecError) as e:
        parse_spec(raw)
    assert "capacity: the search bisects concurrency" in str(e.value), str(e.value)
