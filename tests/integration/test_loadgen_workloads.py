"""Richer workloads over real HTTP against the stand-in: the chat endpoint, Poisson arrivals, shared
prefixes and conversation files as the server receives them.

The stand-in runs in this process (``perf_counter`` arrivals share nova's clock) and counts text
prompt tokens with the tiny model's tokenizer, as a server would.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from tokenizers import Tokenizer

from nova_search.loadgen.client import Target, send
from nova_search.loadgen.http import Pool
from nova_search.loadgen.procs import run_level
from nova_search.loadgen.prompts import Message, Prompt, level_seed, prompt_source
from nova_search.loadgen.runner import LevelPlan, poisson_gaps, take
from nova_search.measure.metrics import summarize
from nova_search.measure.records import RequestRecord
from nova_search.spec import ClosedArrival, ModelSpec, PoissonArrival, WorkloadSpec
from nova_search.testing.standin import StandinServer


def W(**fields: Any) -> WorkloadSpec:
    return WorkloadSpec.model_validate(fields)


def target(srv: StandinServer) -> Target:
    return Target(srv.base_url, srv.model, srv.api_key)


def tokenizer_file(tiny_model: Path) -> str:
    return str(tiny_model / "tokenizer.json")


def n_chunks(n: int, k: int) -> int:
    return -(-n // k)


# ---------------------------------------------------------------- the chat endpoint


@pytest.mark.parametrize("running_usage", [True, False], ids=["running-usage", "final-usage-only"])
@pytest.mark.parametrize("k", [1, 3])
def test_chat_token_counts_are_exact(standin, tiny_model: Path, k: int, running_usage: bool) -> None:
    srv = standin(
        tokens_per_chunk=k,
        running_usage=running_usage,
        tokenizer=tokenizer_file(tiny_model),
        record_prompts=True,
    )
    w = W(endpoint="chat", input_len={"low": 8, "high": 64}, output_len={"low": 1, "high": 24}, seed=3)
    prompts = take(prompt_source(w, ModelSpec(path=str(tiny_model))).prompts(0), 12)
    run = run_level(target(srv), LevelPlan(concurrency=1, warmup=(), prompts=prompts))
    assert [r.success for r in run.records] == [True] * 12, [r.error for r in run.records]
    for r, p in zip(run.records, prompts, strict=True):  # one in flight: records in prompt order
        n = p.output_len
        assert r.output_tokens == n and sum(r.chunk_tokens) == n
        assert r.prompt_tokens == len(p.token_ids)  # the server's count of the message content
        assert len(r.chunk_times) == n_chunks(n, k)
        if running_usage:
            assert r.chunk_tokens == tuple(min(k, n - i) for i in range(0, n, k))
    st = srv.stats()
    assert st.chat_requests == st.requests == 12
    sent = [rec["messages"] for rec in st.prompts]
    assert sent == [[{"role": m.role, "content": m.content} for m in p.messages] for p in prompts]
    assert [rec["max_tokens"] for rec in st.prompts] == [p.output_len for p in prompts]
    res = summarize(run)
    assert res.output_tokens == sum(p.output_len for p in prompts)
    assert res.input_tokens == sum(len(p.token_ids) for p in prompts)


def test_chat_stream_is_vllm_shaped(standin, tiny_model: Path) -> None:
    """The stand-in's chat stream as nova's parser sees it: a role chunk without tokens, content
    deltas with running usage, a final usage chunk, [DONE]."""
    srv = standin(tokens_per_chunk=2, tokenizer=tokenizer_file(tiny_model))
    body = {
        "model": srv.model,
        "messages": [{"role": "user", "content": "hello there"}],
        "max_completion_tokens": 5,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    with httpx.Client(timeout=5) as c:
        text = c.post(f"{srv.base_url}/v1/chat/completions", json=body).text
    events = [line[6:] for line in text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert all(ch["object"] == "chat.completion.chunk" for ch in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert chunks[0]["usage"]["completion_tokens"] == 0
    content = chunks[1:-1]
    assert [ch["usage"]["completion_tokens"] for ch in content] == [2, 4, 5]
    assert all(ch["choices"][0]["delta"]["content"] for ch in content)
    assert content[-1]["choices"][0]["finish_reason"] == "length"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 5
    n_prompt = len(Tokenizer.from_file(tokenizer_file(tiny_model)).encode("hello there").ids)
    assert chunks[-1]["usage"]["prompt_tokens"] == n_prompt
    with httpx.Client(timeout=5) as c:
        whole = c.post(f"{srv.base_url}/v1/chat/completions", json={**body, "stream": False}).json()
    assert whole["object"] == "chat.completion"
    assert whole["choices"][0]["message"]["role"] == "assistant"
    assert whole["usage"]["completion_tokens"] == 5


def test_chat_failures_are_data(standin, tiny_model: Path) -> None:
    srv = standin(error_every=2, tokenizer=tokenizer_file(tiny_model))
    prompt = Prompt((5, 6), 3, (Message("user", "hi"),))

    async def go() -> list[RequestRecord]:
        pool = Pool(srv.base_url)
        try:
            return [await send(pool, target(srv), prompt, timeout_s=5) for _ in range(2)]
        finally:
            pool.close()

    ok, failed = asyncio.run(go())
    assert ok.success and ok.output_tokens == 3
    assert not failed.success and failed.status_code == 500


# ---------------------------------------------------------------- Poisson arrivals


@pytest.mark.serial  # bounds its timings: scripts/test.sh runs it alone
def test_poisson_rate_matches_within_tolerance(standin) -> None:
    rate, n, seed = 50.0, 100, 7
    srv = standin(ttft_s=0.002, itl_s=0.001)
    prompts = tuple(Prompt((3, 4, 5, 6), 3) for _ in range(n))
    plan = LevelPlan(
        concurrency=8,
        warmup=(),
        prompts=prompts,
        arrival=PoissonArrival(kind="poisson", rate=rate),
        arrival_seed=seed,
    )
    run = run_level(target(srv), plan)
    assert len(run.records) == n and all(r.success for r in run.records)
    arrivals = np.array(sorted(srv.stats().arrivals))
    gaps = np.diff(arrivals)
    # the schedule is the seeded one: the span matches the sum of the drawn gaps
    planned = sum(itertools.islice(poisson_gaps(rate, seed), n - 1))
    assert arrivals[-1] - arrivals[0] == pytest.approx(planned, abs=0.05)
    observed = (n - 1) / (arrivals[-1] - arrivals[0])
    assert observed == pytest.approx(rate, rel=0.25)
    assert 0.7 < gaps.std() / gaps.mean() < 1.3  # exponential gaps: coefficient of variation ~1
    sends = sorted(r.send_time for r in run.records)
    assert sends[0] - run.window_start < 0.02  # the first request goes at once
    # another seed, another schedule
    srv.reset_stats()
    run_level(target(srv), dataclasses.replace(plan, arrival_seed=seed + 1))
    other = np.diff(sorted(srv.stats().arrivals))
    assert not np.allclose(other, gaps, atol=0.005)


@pytest.mark.parametrize(("concurrency", "cap", "expected"), [(3, None, 3), (8, 2, 2)])
def test_poisson_never_exceeds_max_in_flight(
    standin, concurrency: int, cap: int | None, expected: int
) -> None:
    """A rate the server cannot keep up with: sends wait for a slot; the cap is the level's
    concurrency unless the arrival gives max_in_flight."""
    srv = standin(ttft_s=0.05, itl_s=0.005)
    n = 24
    plan = LevelPlan(
        concurrency=concurrency,
        warmup=tuple(Prompt((3, 4), 2) for _ in range(4)),
        prompts=tuple(Prompt((3, 4, 5), 4) for _ in range(n)),
        arrival=PoissonArrival(kind="poisson", rate=500.0, max_in_flight=cap),
    )
    assert plan.max_in_flight == expected
    run = run_level(target(srv), plan)
    assert len(run.records) == n and all(r.success for r in run.records)
    assert srv.stats().max_in_flight == expected
    assert run.concurrency == concurrency  # the level stays the key
    # saturated: about `expected` requests per ~70 ms round, far below the offered 500/s
    assert run.window_end - run.window_start >= (n / expected - 1) * 0.05


@pytest.mark.serial  # bounds its timings: scripts/test.sh runs it alone
def test_poisson_duration_mode_stops_sending_at_the_deadline(standin) -> None:
    rate, duration_s = 40.0, 0.8
    srv = standin(ttft_s=0.01, itl_s=0.002)
    plan = LevelPlan(
        concurrency=16,
        warmup=(),
        prompts=(Prompt((3, 4), 3) for _ in itertools.count()),
        duration_s=duration_s,
        arrival=PoissonArrival(kind="poisson", rate=rate),
        arrival_seed=1,
    )
    run = run_level(target(srv), plan)
    deadline = run.window_start + duration_s
    due = itertools.accumulate(poisson_gaps(rate, 1), initial=0.0)
    expected = sum(1 for _ in itertools.takewhile(lambda t: t < duration_s, due))
    assert len(run.records) == pytest.approx(expected, abs=2)
    assert all(r.send_time < deadline for r in run.records)
    assert all(r.success for r in run.records)
    assert srv.stats().requests == len(run.records)
    assert run.window_end - run.window_start < duration_s + 0.3


def test_closed_loop_is_the_default(standin) -> None:
    srv = standin(ttft_s=0.02)
    plan = LevelPlan(concurrency=3, warmup=(), prompts=tuple(Prompt((3,), 2) for _ in range(9)))
    assert plan.arrival == ClosedArrival() and plan.max_in_flight == 3
    run_level(target(srv), plan)
    assert srv.stats().max_in_flight == 3


# ---------------------------------------------------------------- shared prefixes at the server


def test_shared_prefix_prompts_share_their_prefix_at_the_server(standin) -> None:
    srv = standin(record_prompts=True, itl_s=0.001)
    w = W(kind="shared_prefix", num_prefixes=3, prefix_len=32, input_len=8, output_len=4, seed=5)
    source = prompt_source(w, ModelSpec(path="/nonexistent", vocab_size=32000))
    warm, measured = (source.prompts(level_seed(w.seed, 0, warmup=flag)) for flag in (True, False))
    plan = LevelPlan(concurrency=3, warmup=take(warm, 3), prompts=take(measured, 12))
    run = run_level(target(srv), plan)
    assert all(r.success and r.prompt_tokens == 40 for r in run.records)
    got = [rec["prompt"] for rec in srv.stats().prompts]
    assert len(got) == 15 and all(len(p) == 40 for p in got)
    heads = {tuple(p[:32]) for p in got}
    assert heads == set(source.prefixes)  # 3 system prompts, warmup and window alike
    assert len({tuple(p[32:]) for p in got}) == 15  # each request its own suffix


def test_shared_prefix_chat_sends_the_prefix_as_the_system_message(standin, tiny_model: Path) -> None:
    srv = standin(record_prompts=True, tokenizer=tokenizer_file(tiny_model))
    w = W(kind="shared_prefix", endpoint="chat", num_prefixes=2, prefix_len=48, input_len=6, output_len=3)
    prompts = take(prompt_source(w, ModelSpec(path=str(tiny_model))).prompts(0), 8)
    run = run_level(target(srv), LevelPlan(concurrency=2, warmup=(), prompts=prompts))
    assert all(r.success and r.prompt_tokens == 54 and r.output_tokens == 3 for r in run.records)
    sent = [rec["messages"] for rec in srv.stats().prompts]
    assert len({m[0]["content"] for m in sent}) == 2
    assert all(m[0]["role"] == "system" and m[1]["role"] == "user" for m in sent)


# ---------------------------------------------------------------- conversation files at the server


def test_jsonl_conversations_reach_the_server(standin, tiny_model: Path, tmp_path: Path) -> None:
    tok = Tokenizer.from_file(tokenizer_file(tiny_model))
    records = [
        {
            "messages": [
                {"role": "user", "content": f"Question {i}: why is the sky blue?"},
                {"role": "assistant", "content": "Because of Rayleigh scattering. " * (i + 1)},
            ]
        }
        for i in range(5)
    ]
    path = tmp_path / "chats.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records))
    srv = standin(record_prompts=True, tokenizer=tokenizer_file(tiny_model), tokens_per_chunk=2)
    for endpoint in ("completions", "chat"):
        srv.reset_stats()
        w = W(kind="jsonl", path=str(path), endpoint=endpoint, output_len="from_data", seed=2)
        prompts = take(prompt_source(w, ModelSpec(path=str(tiny_model))).prompts(0), 5)
        run = run_level(target(srv), LevelPlan(concurrency=1, warmup=(), prompts=prompts))
        assert all(r.success for r in run.records)
        answers = {
            len(tok.encode(r["messages"][1]["content"], add_special_tokens=False).ids) for r in records
        }
        assert {r.output_tokens for r in run.records} == answers  # from the reference answers
        for r, p in zip(run.records, prompts, strict=True):
            assert r.output_tokens == p.output_len and r.prompt_tokens == len(p.token_ids)
        st = srv.stats()
        if endpoint == "chat":
            assert st.chat_requests == 5
            assert all(
                rec["messages"][-1]["role"] == "user" for rec in st.prompts
            )  # up to the last user turn
        else:
            assert st.chat_requests == 0
            assert [rec["prompt"] for rec in st.prompts] == [list(p.token_ids) for p in prompts]


def test_a_trial_that_uses_up_its_jsonl_records_says_so(tiny_model: Path, tmp_path: Path) -> None:
    """3 records, 8 requests a level: from the first level on, prompts repeat on the server, which
    a prefix cache answers from the cache; the trial carries a warning that says so, once."""
    import optuna
    import yaml

    from nova_search import schema
    from nova_search.testing.specs import minimal_spec_dict
    from tests.support.cli import nova_ok

    path = tmp_path / "three.jsonl"
    rows = ({"messages": [{"role": "user", "content": f"record {i}: " + "text " * 20}]} for i in range(3))
    path.write_text("\n".join(json.dumps(r) for r in rows))
    raw = minimal_spec_dict(
        name="jsonl-round",
        workload={"kind": "jsonl", "path": str(path), "tokenizer": str(tiny_model), "output_len": 8},
        sweep={"concurrency": [1, 2], "requests": 8},
    )
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(raw))
    url = f"sqlite:///{tmp_path}/s.db"
    nova_ok("run", str(spec), "--storage", url, "--artifacts-dir", str(tmp_path / "art"))
    (t,) = optuna.load_study(study_name="jsonl-round", storage=url).get_trials()
    warnings = [w for w in schema.WARNINGS.read(t.user_attrs) or () if "came round again" in w]
    assert len(warnings) == 1
    assert warnings[0].startswith("concurrency 1: the workload's 3 records came round again (8 requests")
