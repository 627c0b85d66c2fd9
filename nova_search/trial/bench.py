"""``nova-search bench``: measure an already-running OpenAI-compatible server with nova's load
generator, level by level, and return the same LevelResults a trial stores. Used to check a
deployment, and by the cross-check against vLLM's own benchmark (nova_search/testing/crosscheck/,
benchmarks/gpu/crosscheck_h200.py).

The client runs on ``cpus`` in as many processes as the level needs (``loadgen.procs``); a level
whose busiest client process is CPU-bound is re-run on more processes, or reported flagged.
``vllm_names`` turns a LevelResult into the keys ``vllm bench serve --save-result`` writes. With
``requests_out``, every measured request is also written there as a JSON line (a trial's
``requests.jsonl`` rows: level, send time from the first level's window start, TTFT, end-to-end time,
tokens, success), so a level's figures can be examined request by request afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from nova_search.artifacts import append_jsonl, request_rows
from nova_search.errors import NovaError
from nova_search.loadgen.client import Target
from nova_search.loadgen.procs import ClientPlan, chunk_rate, measure_level
from nova_search.loadgen.prompts import level_seed, prompt_source
from nova_search.loadgen.runner import LevelPlan, PromptStream, take
from nova_search.measure.metrics import LevelResult, summarize
from nova_search.spec import ModelSpec, WorkloadSpec
from nova_search.trial.window import RERUN_SEED_STEP


@dataclass(frozen=True, slots=True)
class BenchPlan:
    url: str
    concurrency: tuple[int, ...]
    workload: WorkloadSpec
    vocab_size: int
    api_key: str | None = None
    model: str | None = None
    num_requests: int | None = None
    duration_s: float | None = None
    warmup_requests: int = 4
    request_timeout_s: float = 300.0
    #: CPU cores the load generator runs on (its processes split them)
    cpus: tuple[int, ...] | None = None
    #: client processes; None: chosen per level from the cores and the expected rate
    processes: int | None = None
    #: running usage in every chunk: True, False, or None (decided by the warmup, see loadgen.client)
    per_chunk_usage: bool | None = None
    #: re-run a client-bound level on more processes where the cores allow
    rerun_client_bound: bool = True
    #: open every lane's connection before the window (False: as vllm bench serve does)
    preconnect: bool = True
    #: a JSONL file for every measured request (written anew)
    requests_out: Path | None = None


def served_model(url: str, api_key: str | None) -> str:
    """The first model the server lists at /v1/models."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        r = httpx.get(f"{url}/v1/models", headers=headers, timeout=10)
        r.raise_for_status()
        return str(r.json()["data"][0]["id"])
    except (httpx.HTTPError, KeyError, IndexError, ValueError) as e:
        raise NovaError(
            f"--model not given and {url}/v1/models did not name one ({type(e).__name__}); pass --model"
        ) from None


def run_bench(plan: BenchPlan) -> list[LevelResult]:
    url = plan.url.rstrip("/")
    model = plan.model or served_model(url, plan.api_key)
    target = Target(url, model, plan.api_key)
    source = prompt_source(plan.workload, ModelSpec(path=model, vocab_size=plan.vocab_size))
    client = ClientPlan(cpus=plan.cpus, processes=plan.processes, rerun=plan.rerun_client_bound)
    results = []
    expected: float | None = None
    if plan.requests_out is not None:
        _empty(plan.requests_out)
    origin: float | None = None
    for i, c in enumerate(plan.concurrency):
        warm = take(source.prompts(level_seed(plan.workload.seed, i, warmup=True)), plan.warmup_requests)

        def plan_for(attempt: int, i: int = i, c: int = c, warm: tuple = warm) -> LevelPlan:
            seed = level_seed(plan.workload.seed, i) + attempt * RERUN_SEED_STEP
            return LevelPlan(
                concurrency=c,
                warmup=warm,
                prompts=PromptStream(source, seed, plan.num_requests),
                duration_s=plan.duration_s,
                request_timeout_s=plan.request_timeout_s,
                metrics_url=f"{url}/metrics",
                per_chunk_usage=plan.per_chunk_usage,
                preconnect=plan.preconnect,
            )

        run = measure_level(target, plan_for, client, expected)
        # the next level's rate, if it grew in proportion to its concurrency (an upper bound)
        expected = chunk_rate(run) * (plan.concurrency[i + 1] / c) if i + 1 < len(plan.concurrency) else None
        results.append(summarize(run))
        if plan.requests_out is not None:
            origin = run.window_start if origin is None else origin
            rows = request_rows(run.records, level=c, repeat=0, origin=origin)
            if not append_jsonl(plan.requests_out, rows):
                raise NovaError(
                    f"--requests-out {plan.requests_out}: the requests of concurrency {c} "
                    "could not be written (see the warning above)"
                )
    return results


def _empty(path: Path) -> None:
    """The requests file, emptied, or a clear error before anything is measured."""
    try:
        path.write_text("", encoding="utf-8")
    except OSError as e:
        raise NovaError(f"--requests-out {path}: cannot write it ({e.strerror or e})") from None


#: LevelResult latency names -> the names ``vllm bench serve`` uses in its result JSON
_VLLM_LATENCY = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2e": "e2el"}
_VLLM_STATS = {
    "mean": "mean",
    "p50": "median",
    "std": "std",
    "p90": "p90",
    "p95": "p95",
    "p99": "p99",
    "p999": "p99.9",
}


def vllm_names(level: LevelResult) -> dict[str, Any]:
    """One level under the keys of ``vllm bench serve --save-result`` (vLLM's
    ``benchmarks/serve.py``): ``completed``, ``failed``, ``total_input_tokens``,
    ``total_output_tokens``, ``duration``, ``request_throughput``, ``output_throughput``,
    ``total_token_throughput``, ``max_concurrency``, and
    ``{mean,median,std,p90,p95,p99,p99.9}_{ttft,tpot,itl,e2el}_ms``
    (vLLM writes only the percentiles it was asked for, p99 by default), plus nova's client figures
    under ``nova_`` keys. ``request_goodput`` is nova's goodput (requests meeting nova's SLOs)."""
    out: dict[str, Any] = {
        "duration": level.duration_s,
        "completed": level.completed,
        "failed": level.errors,
        "total_input_tokens": level.input_tokens,
        "total_output_tokens": level.output_tokens,
        "request_throughput": level.request_throughput,
        "request_goodput": level.goodput,
        "output_throughput": level.output_throughput,
        "total_token_throughput": level.total_token_throughput,
        "max_concurrency": level.concurrency,
        "num_prompts": level.requests,
    }
    for ours, theirs in _VLLM_LATENCY.items():
        for stat, word in _VLLM_STATS.items():
            out[f"{word}_{theirs}_ms"] = getattr(level, f"{ours}_{stat}_ms")
    out["nova_client_cpu_share"] = level.client_cpu_share
    out["nova_client_processes"] = level.client_processes
    out["nova_client_bound"] = level.client_bound
    out["nova_client_note"] = level.client_note
    return out
