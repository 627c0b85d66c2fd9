"""A level over several client processes (nova_search.loadgen.procs) against the stand-in, over real
HTTP: the merged records are exactly what one process sends, and a CPU-bound client is flagged.

The stand-in records every prompt it was sent (``record_prompts``), so "the same requests" is checked
on the server's side, not only on the client's.
"""

from __future__ import annotations

import collections
import itertools
import os
import statistics
import subprocess
import sys
import threading
import time
from multiprocessing import resource_tracker
from pathlib import Path

import pytest

from nova_search.loadgen.client import Target
from nova_search.loadgen.procs import ClientPlan, measure_level, run_level
from nova_search.loadgen.prompts import Message, Prompt, SyntheticSource
from nova_search.loadgen.runner import LevelPlan, PromptStream, poisson_gaps, shares
from nova_search.measure.metrics import summarize
from nova_search.spec import PoissonArrival, WorkloadSpec
from nova_search.testing.workers import children

REPO = Path(__file__).resolve().parents[2]

WORKLOAD = WorkloadSpec(input_len={"dist": "uniform", "low": 4, "high": 24}, output_len=12, seed=3)


def stream(seed: int, count: int | None) -> PromptStream:
    return PromptStream(SyntheticSource(WORKLOAD, vocab=1000), seed, count)


def sent(srv) -> collections.Counter:
    """What the server was asked, one entry per request: (prompt ids, max_tokens)."""
    return collections.Counter((tuple(p["prompt"]), p["max_tokens"]) for p in srv.stats().prompts)


def asked(prompts) -> collections.Counter:
    return collections.Counter((p.token_ids, p.output_len) for p in prompts)


def totals(run) -> tuple[int, int, int, int]:
    res = summarize(run)
    return res.requests, res.errors, res.input_tokens, res.output_tokens


@pytest.mark.parametrize("processes", [2, 3])
def test_request_count_windows_merge_exactly(standin, processes: int) -> None:
    n, concurrency = 60, 6
    plan = LevelPlan(concurrency=concurrency, warmup=(), prompts=stream(11, n))
    expected = asked(list(plan.prompts))
    assert sum(expected.values()) == n

    one = standin(record_prompts=True, ttft_s=0.002, itl_s=0.001)
    single = run_level(Target(one.base_url, one.model), plan, processes=1)
    many = standin(record_prompts=True, ttft_s=0.002, itl_s=0.001)
    merged = run_level(Target(many.base_url, many.model), plan, processes=processes)

    assert merged.processes == processes and single.processes == 1
    assert totals(merged) == totals(single)
    assert totals(merged)[:2] == (n, 0)
    assert sent(many) == sent(one) == expected  # every prompt once: none lost, none sent twice
    assert many.stats().max_in_flight <= concurrency
    # one clock: the window spans every process's requests
    assert all(merged.window_start <= r.send_time and r.end_time <= merged.window_end for r in merged.records)
    assert len(merged.process_cpu_s) == processes and all(c > 0 for c in merged.process_cpu_s)


@pytest.mark.serial  # bounds its timings: scripts/test.sh runs it alone
def test_duration_windows_send_a_prefix_of_the_stream(standin) -> None:
    srv = standin(record_prompts=True, ttft_s=0.01, itl_s=0.002)
    plan = LevelPlan(concurrency=4, warmup=(), prompts=stream(12, None), duration_s=0.8)
    run = run_level(Target(srv.base_url, srv.model), plan, processes=2)
    k = len(run.records)
    assert k >= 8 and all(r.success for r in run.records)
    first_k = [p for _, p in zip(range(k), stream(12, None), strict=False)]
    assert sent(srv) == asked(first_k)  # the first k prompts of the one stream, none skipped
    assert all(r.send_time < run.window_start + plan.duration_s + 0.05 for r in run.records)


@pytest.mark.serial  # bounds its timings: scripts/test.sh runs it alone
def test_poisson_arrivals_are_one_schedule_split_over_processes(standin) -> None:
    n = 40
    plan = LevelPlan(
        concurrency=8,
        warmup=(),
        prompts=stream(13, n),
        arrival=PoissonArrival(kind="poisson", rate=80.0),
        arrival_seed=5,
    )
    one = standin(record_prompts=True, ttft_s=0.002, itl_s=0.001)
    single = run_level(Target(one.base_url, one.model), plan, processes=1)
    many = standin(record_prompts=True, ttft_s=0.002, itl_s=0.001)
    merged = run_level(Target(many.base_url, many.model), plan, processes=2)
    assert sent(many) == sent(one) == asked(list(plan.prompts))
    assert totals(merged) == totals(single)
    # one seeded schedule: no arrival goes before it is due (within the window start's own lag after t0),
    # and sends keep to the schedule (the median lag; a busy 2-core CI host delays single sends)
    due = list(itertools.accumulate(itertools.islice(poisson_gaps(80.0, 5), n - 1), initial=0.0))
    for run in (single, merged):
        offsets = sorted(r.send_time - run.window_start for r in run.records)
        lags = [s - d for s, d in zip(offsets, due, strict=True)]
        assert min(lags) > -0.05, min(lags)  # the window starts when the first share wakes, a little after t0
        assert statistics.median(lags) < 0.05, statistics.median(lags)


def test_shares_split_lanes_and_warmup() -> None:
    plan = LevelPlan(concurrency=10, warmup=tuple(stream(1, 5)), prompts=())
    parts = shares(plan, 3)
    assert [p.lanes for p in parts] == [4, 3, 3]
    assert asked(x for p in parts for x in p.warmup) == asked(plan.warmup)
    assert len(shares(LevelPlan(concurrency=2, warmup=(), prompts=()), 8)) == 2  # one lane at least each


def test_a_client_bound_level_is_rerun_on_more_processes_then_flagged(standin) -> None:
    """The policy on a real run: a share threshold every real client passes makes each window
    client-bound; the level is re-run on the second core, then kept flagged with the reason."""
    srv = standin(ttft_s=0.001, itl_s=0.001)
    client = ClientPlan(cpus=(0, 1), processes=None, bound_share=1e-4)
    seeds: list[int] = []

    def plan_for(attempt: int) -> LevelPlan:
        seeds.append(attempt)
        return LevelPlan(concurrency=4, warmup=(), prompts=stream(20 + attempt, 40))

    run = measure_level(Target(srv.base_url, srv.model), plan_for, client)
    assert seeds == [0, 1]  # new prompts for the re-run
    assert run.processes == 2 and run.client_bound is True
    assert "re-run on 2 processes" in run.client_note
    assert "no more cores" in run.client_note
    res = summarize(run)
    assert (res.client_bound, res.client_processes, res.requests) == (True, 2, 40)
    assert res.client_note == run.client_note


@pytest.mark.serial  # needs the two cores to itself: scripts/test.sh runs it alone
def test_a_cpu_bound_client_is_flagged(engine_free_core: int) -> None:
    """One client process on one core against a stand-in (in a process of its own, on the other core)
    that streams with no delay, faster than one core parses (chat chunks with running usage: every
    chunk is decoded as JSON): the level is flagged client-bound, and as the one core given allows no
    second process, it is kept flagged with that reason.

    Whether the client really is CPU-bound depends on the stand-in keeping up, which a busy neighbour
    on its core can prevent: each attempt must be flagged exactly when its busiest process passed the
    share, and one attempt of five must have been CPU-bound."""
    proc = subprocess.Popen(
        ["taskset", "-c", "0", sys.executable, "-m", "nova_search.testing.standin", "--port", "0"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    prompt = Prompt((5,) * 8, 256, (Message("user", "hello there"),))
    plan = LevelPlan(concurrency=32, warmup=(), prompts=(prompt,) * 600, per_chunk_usage=True)
    client = ClientPlan(cpus=(engine_free_core,))
    flagged = []
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().split()[-1]
        for _ in range(5):
            res = summarize(measure_level(Target(base_url, "standin"), lambda attempt: plan, client))
            assert (res.requests, res.errors, res.output_tokens) == (600, 0, 600 * 256)
            assert res.client_cpu_share is not None and res.client_processes == 1
            assert res.client_bound is (res.client_cpu_share > client.bound_share), res.client_cpu_share
            if res.client_bound:
                assert "no more cores" in res.client_note and f"{res.client_cpu_share:.0%}" in res.client_note
                flagged.append(res.client_cpu_share)
                break
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert flagged, "the client never got CPU-bound in 5 tries: the stand-in's core was too busy"


@pytest.fixture
def engine_free_core() -> int:
    """The core the client gets (the stand-in takes core 0)."""
    cores = sorted(os.sched_getaffinity(0))
    assert len(cores) >= 2, "this test needs two cores: one for the stand-in, one for the client"
    return cores[1]


def test_client_processes_do_not_outlive_an_interrupted_level(standin) -> None:
    """A level interrupted mid-window (the parent's level ends by an exception) leaves no client
    process behind."""
    srv = standin(ttft_s=0.05, itl_s=0.05)
    plan = LevelPlan(concurrency=4, warmup=(), prompts=stream(40, 200))
    # multiprocessing's resource tracker is one process per parent, started on first use and ended
    # with the parent: start it now, so that only the level's own processes are new
    resource_tracker.ensure_running()
    before = set(children(os.getpid()))

    def interrupt() -> None:
        # wait until the level's client processes are up and streaming, then end the level
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and srv.stats().requests < 4:
            time.sleep(0.05)
        os.kill(os.getpid(), 2)  # SIGINT: KeyboardInterrupt in the main thread

    threading.Thread(target=interrupt, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        run_level(Target(srv.base_url, srv.model), plan, processes=2)
    time.sleep(0.5)
    assert set(children(os.getpid())) - before == set()
