# ruff: noqa: E501 - a spec dict reads best one mapping a line
"""A trace replayed against the stand-in over real HTTP: requests reach the server within a few ms of
their schedule at each speed (one client process and two), the server receives the same tokens for
the same hash_ids blocks, a client that falls behind its schedule is flagged client-bound with the
reason, and a whole study on a trace (the stand-in engine launched as vLLM is, through the real CLI)
measures its speeds as levels, stores the trace's summary, and every reader shows it.

The stand-in runs in this process (``perf_counter`` arrivals share nova's clock).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import pytest
import yaml

from nova_search import schema
from nova_search.loadgen.client import Target
from nova_search.loadgen.prompts import prompt_source
from nova_search.loadgen.replay import TraceSource
from nova_search.spec import StudySpec, parse_spec
from nova_search.testing.specs import fake_spec_dict, minimal_spec_dict
from nova_search.testing.standin import StandinServer
from nova_search.trial.window import run_window
from tests.support.cli import nova, nova_ok
from tests.support.contract import check_text


def _trace(tmp_path: Path, rows: list[dict[str, Any]]) -> str:
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _bursty(n: int, seed: int = 5) -> list[dict[str, Any]]:
    """``n`` requests: bursts of five 2 ms apart, bursts ~60 ms apart, short prompts and outputs."""
    rng = np.random.default_rng(seed)
    t, rows = 0.0, []
    for k in range(n):
        t += 0.002 if k % 5 else float(rng.exponential(0.06))
        rows.append({"timestamp": round(t * 1000, 3), "input_length": 24, "output_length": 3})
    return rows


def _spec(path: str, *, speeds: list[float], requests: int, **sweep: Any) -> StudySpec:
    raw = minimal_spec_dict(
        workload={
            "kind": "trace",
            "path": path,
            "block_size": 16,
            "arrival": {"kind": "trace", "max_in_flight": 32},
        },
        sweep={"speeds": speeds, "requests": requests, "warmup_requests": 0, **sweep},
        objectives=[{"metric": "output_throughput", "direction": "maximize"}],
    )
    return parse_spec(raw)


def _window(spec: StudySpec, srv: StandinServer, level: int, seed: int = 1):
    source = prompt_source(spec.workload, spec.model)
    assert isinstance(source, TraceSource)
    target = Target(srv.base_url, srv.model, srv.api_key)
    return run_window(spec, source, target, concurrency=level, seed=seed, warmup=())


def _arrival_error(run, srv: StandinServer) -> np.ndarray:
    """Each request's arrival at the server minus its due time (seconds), in order."""
    dues = np.sort([r.due_time for r in run.records])
    arrivals = np.sort(srv.stats().arrivals)
    assert len(arrivals) == len(dues)
    return arrivals - dues


@pytest.mark.serial  # bounds a schedule's lag: scripts/test.sh runs it alone
@pytest.mark.parametrize("speed", [1.0, 2.0])
def test_requests_reach_the_server_within_a_few_ms_of_their_schedule(standin, tmp_path, speed) -> None:
    """Every window keeps the trace's schedule exactly and sends no request early; and the requests
    reach the server within a few ms of it (the median under 2 ms, the 99th percentile under 5 ms, none
    20 ms late) in one window of three, each against a fresh stand-in. On a shared 2-core VM the client
    or the stand-in stalls for up to 75 ms now and then with nothing else running (one window in a few
    on an Intel VM: 2 runs of 11 failed a single window's bound); a lag of the client's own shows in
    every window."""
    rows = _bursty(80)
    spec = _spec(_trace(tmp_path, rows), speeds=[1, 2], requests=80)
    # the schedule is the trace's at the speed: request j due (t_j - t_0) / speed after the start
    planned = (np.array([r["timestamp"] for r in rows]) - rows[0]["timestamp"]) / 1000.0 / speed
    tails = []
    for _ in range(3):
        srv = standin(ttft_s=0.002, itl_s=0.001)
        run = _window(spec, srv, level=round(speed * 100))
        assert len(run.records) == 80 and all(r.success for r in run.records)
        dues = np.sort([r.due_time for r in run.records])
        assert np.allclose(dues - dues[0], planned, atol=1e-9)
        late = _arrival_error(run, srv)
        assert late.min() > -0.0005, "a request arrived before it was due"
        tails.append((float(np.median(late)), float(np.percentile(late, 99)), float(late.max())))
        if tails[-1][0] < 0.002 and tails[-1][1] < 0.005 and tails[-1][2] < 0.02:
            assert run.client_bound is False, run.client_note
            return
    pytest.fail(f"every window's requests were late (median, 99th percentile, max in s): {tails}")


def test_two_client_processes_keep_the_one_schedule(standin, tmp_path) -> None:
    """Two client processes send no request early, and within 50 ms of the schedule (99th percentile)
    in one window of three (a stall of the VM's alone reached 75 ms: the test above)."""
    spec = _spec(_trace(tmp_path, _bursty(60)), speeds=[2], requests=60, client_processes=2)
    tails = []
    for _ in range(3):
        srv = standin(ttft_s=0.002, itl_s=0.001)
        run = _window(spec, srv, level=200)
        assert run.processes == 2 and len(run.records) == 60 and all(r.success for r in run.records)
        late = _arrival_error(run, srv)
        assert late.min() > -0.0005, "a request arrived before it was due"
        tails.append(float(np.percentile(late, 99)))
        if tails[-1] < 0.05:
            return
    pytest.fail(f"every window's requests were late (99th percentile in s): {tails}")


def test_the_server_receives_the_same_tokens_for_the_same_blocks(standin, tmp_path) -> None:
    srv = standin(record_prompts=True)
    rows = [
        {"timestamp": 0, "input_length": 40, "output_length": 2, "hash_ids": [1, 2, 3]},
        {"timestamp": 5, "input_length": 48, "output_length": 2, "hash_ids": [1, 2, 4]},
        {"timestamp": 10, "input_length": 20, "output_length": 2, "hash_ids": [1, 7]},
        {"timestamp": 15, "input_length": 16, "output_length": 2, "hash_ids": [8]},
    ]
    spec = _spec(_trace(tmp_path, rows), speeds=[1], requests=4)
    run = _window(spec, srv, level=100)
    assert all(r.success for r in run.records)
    sent = {len(p["prompt"]): p["prompt"] for p in srv.stats().prompts}  # lengths tell them apart
    a, b, c, d = sent[40], sent[48], sent[20], sent[16]
    assert a[:32] == b[:32] and a[32:40] != b[32:40]  # blocks 1, 2 shared; 3 against 4
    assert c[:16] == a[:16] and c[16:] != a[16:20]  # block 1 shared; 7 its own
    assert d != a[:16]
    assert [p["max_tokens"] for p in srv.stats().prompts] == [2, 2, 2, 2]


def test_a_client_that_falls_behind_is_flagged_client_bound(standin, tmp_path) -> None:
    """Thirty requests due at once, two at a time at most (workload.arrival.max_in_flight) on a server
    that takes 30 ms each: the last ones go hundreds of ms late, and the window says so."""
    srv = standin(ttft_s=0.03, itl_s=0.001)
    rows = [{"timestamp": k, "input_length": 8, "output_length": 2} for k in range(30)]
    raw = minimal_spec_dict(
        workload={
            "kind": "trace",
            "path": _trace(tmp_path, rows),
            "arrival": {"kind": "trace", "max_in_flight": 2},
        },
        sweep={"speeds": [1], "requests": 30, "warmup_requests": 0},
    )
    run = _window(parse_spec(raw), srv, level=100)
    assert len(run.records) == 30 and all(r.success for r in run.records)
    assert run.client_bound is True
    assert "sends fell behind the trace's schedule" in run.client_note
    assert (
        "the in-flight cap was reached (2 out at once, workload.arrival.max_in_flight 2)" in run.client_note
    )
    assert max(r.lag for r in run.records) > 0.2


def test_a_study_on_a_trace_measures_its_speeds_and_every_reader_shows_the_trace(tmp_path) -> None:
    rows = _bursty(400, seed=9)
    for k, r in enumerate(rows):  # a system prompt of two blocks, shared by every request
        r.update(input_length=40, hash_ids=[1, 2, 100 + k])
    raw = fake_spec_dict(
        2,
        name="trace-study",
        workload={"kind": "trace", "path": _trace(tmp_path, rows), "block_size": 16, "trace_start_s": 0.5},
        sweep={"speeds": [0.5, 1, 2], "warmup_requests": 1, "requests": 20},
        objectives=[
            {"metric": "output_throughput", "direction": "maximize"},
            {"metric": "ttft_p99_ms", "direction": "minimize", "at": 200},
        ],
        constraints=["ttft_p99_ms <= 60000 @200"],
        baselines=["stock"],
    )
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(raw))
    url = f"sqlite:///{tmp_path}/s.db"
    r = nova("run", str(spec_file), "--storage", url, "--artifacts-dir", str(tmp_path / "art"))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    study = optuna.load_study(study_name="trace-study", storage=url)
    summary = schema.TRACE.read(study.user_attrs)
    assert summary is not None and summary["requests"] == 400 and summary["prefix_reuse"] > 0.5
    trials = study.get_trials()
    assert [t.state for t in trials] == [optuna.trial.TrialState.COMPLETE] * 2
    for t in trials:
        levels = schema.LEVELS.read(t.user_attrs)
        assert [lv.concurrency for lv in levels] == [50, 100, 200]
        assert all(lv.completed == 20 and lv.send_lag_p99_ms is not None for lv in levels)
        assert schema.SATURATION.read(t.user_attrs) is not None
    report = tmp_path / "report.html"
    nova_ok("report", "trace-study", "--storage", url, "-o", str(report))
    html = report.read_text()
    assert 'id="trace"' in html and "The levels are speeds of this trace" in html
    assert "prompt tokens" in html and "requests per second over the trace" in html
    assert "What to deploy" in nova_ok("policy", "trace-study", "--storage", url)
    assert "trace-study" in nova_ok("status", "trace-study", "--storage", url)
    # the send lag and the trace keep the JSON contract (check-jsonschema, formats checked)
    dump = check_text("dump", nova_ok("dump", "trace-study", "--storage", url), tmp_path, "dump")
    assert all(lv["send_lag_p99_ms"] is not None for t in dump["trials"] for lv in t["levels"])
    check_text(
        "status", nova_ok("status", "trace-study", "--storage", url, "--format", "json"), tmp_path, "s"
    )


def test_create_and_validate_refuse_a_bad_trace_by_its_line_before_anything_is_written(tmp_path) -> None:
    rows = _bursty(5)
    text = "".join(json.dumps(r) + "\n" for r in rows[:3]) + '{"timestamp": 9999, "input_length": -4}\n'
    (tmp_path / "trace.jsonl").write_text(text)
    raw = minimal_spec_dict(
        workload={"kind": "trace", "path": str(tmp_path / "trace.jsonl")},
        sweep={"speeds": [1], "requests": 3},
    )
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(raw))
    db = tmp_path / "s.db"
    for command in (("validate", str(spec_file)), ("create", str(spec_file), "--storage", f"sqlite:///{db}")):
        r = nova(*command)
        assert r.returncode == 2, r.stdout + r.stderr
        assert "workload.path: " in r.stderr and "trace.jsonl line 4: no output_length" in r.stderr, r.stderr
    assert not db.exists()
    (tmp_path / "trace.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:2]))
    r = nova("create", str(spec_file), "--storage", f"sqlite:///{db}")
    assert r.returncode == 2 and "sweep.requests: 3 requests a window, but" in r.stderr, r.stderr
    assert not db.exists()
