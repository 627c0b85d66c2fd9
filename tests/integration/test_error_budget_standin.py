"""A window's error budget (issue 40, finding 5), on the stand-in server through the real HTTP client:
once a window's failures pass ``LevelPlan.max_errors`` nothing more is sent and the requests in flight
are cancelled; without a budget every planned request is sent."""

from __future__ import annotations

import time

import pytest

from nova_search.loadgen.client import Target
from nova_search.loadgen.procs import run_level
from nova_search.loadgen.prompts import Prompt
from nova_search.loadgen.runner import LevelPlan
from nova_search.spec.workload import ClosedArrival, PoissonArrival


def _prompts(n: int) -> tuple[Prompt, ...]:
    return tuple(
        Prompt(token_ids=tuple(3 + (i * 31 + j) % 1000 for j in range(16)), output_len=8) for i in range(n)
    )


@pytest.mark.parametrize(
    "arrival", [ClosedArrival(), PoissonArrival(kind="poisson", rate=200.0)], ids=["closed", "poisson"]
)
def test_a_window_past_its_error_budget_is_abandoned(standin, arrival) -> None:
    srv = standin(error_every=1, itl_s=0.001)  # every request fails (HTTP 500)
    target = Target(base_url=srv.base_url, model=srv.model, api_key=srv.api_key)
    plan = LevelPlan(concurrency=2, warmup=(), prompts=_prompts(40), arrival=arrival, max_errors=1)
    run = run_level(target, plan)
    assert 2 <= len(run.records) < 10, len(run.records)  # 2 failures spend it; 40 were planned
    assert not any(r.success for r in run.records)
    everything = run_level(target, LevelPlan(concurrency=2, warmup=(), prompts=_prompts(40), arrival=arrival))
    assert len(everything.records) == 40  # no budget: every planned request


def test_requests_in_flight_are_cancelled_once_the_budget_is_spent(standin) -> None:
    """One lane fails at once (500), the other's request streams for 10 s: the budget of 0 is spent by
    the failure, and the streaming request is cancelled rather than waited for."""
    srv = standin(error_every=2, itl_s=0.05)  # requests 2, 4, ... fail at once; the others stream
    target = Target(base_url=srv.base_url, model=srv.model, api_key=srv.api_key)
    long = tuple(Prompt(token_ids=(5,) * 16, output_len=200) for _ in range(10))
    started = time.monotonic()
    run = run_level(target, LevelPlan(concurrency=2, warmup=(), prompts=long, max_errors=0))
    assert time.monotonic() - started < 5  # not the 10 s of the streaming request
    assert [r.success for r in run.records] == [False]
