"""``nova-search bench``: measure an already-running OpenAI-compatible server with nova's load
generator, level by level, and return the same LevelResults a trial stores. Used to check a
deployment, and by the tests' cross-check against vLLM's own benchmark."""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from nova_search.errors import NovaError
from nova_search.loadgen.client import Target
from nova_search.loadgen.runner import LevelPlan, run_level, take
from nova_search.loadgen.workload import level_seed, prompt_source
from nova_search.metrics import LevelResult, summarize
from nova_search.spec import ModelSpec, WorkloadSpec


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
    #: CPU cores the load generator is pinned to while it measures
    cpus: tuple[int, ...] | None = None


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
    results = []
    for i, c in enumerate(plan.concurrency):
        warm = source.prompts(level_seed(plan.workload.seed, i, warmup=True))
        prompts = source.prompts(level_seed(plan.workload.seed, i))
        run = run_level(
            target,
            LevelPlan(
                concurrency=c,
                warmup=take(warm, plan.warmup_requests),
                prompts=take(prompts, plan.num_requests) if plan.num_requests else prompts,
                duration_s=plan.duration_s,
                request_timeout_s=plan.request_timeout_s,
                metrics_url=f"{url}/metrics",
            ),
            plan.cpus,
        )
        results.append(summarize(run))
    return results
