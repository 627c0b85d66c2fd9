"""Closed-loop concurrency: N requests in flight until the level's requests (or duration) are done.

A warmup at the same concurrency runs first and is excluded. While the window is open, a poller
samples the engine's /metrics (gauges need reads during load: a read before it shows 0).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice

import httpx

from nova_search.engine.probe import parse_metrics
from nova_search.loadgen.client import Target, send
from nova_search.loadgen.workload import Prompt
from nova_search.records import EngineSample, LevelRun, RequestRecord


@dataclass(frozen=True, slots=True)
class LevelPlan:
    concurrency: int
    warmup: tuple[Prompt, ...]
    #: a finite tuple (request count) or an endless iterator bounded by duration_s
    prompts: tuple[Prompt, ...] | Iterator[Prompt]
    duration_s: float | None = None
    request_timeout_s: float = 300.0
    metrics_url: str | None = None
    metrics_interval_s: float = 0.5


async def _closed_loop(
    client: httpx.AsyncClient,
    target: Target,
    concurrency: int,
    prompts: tuple[Prompt, ...] | Iterator[Prompt],
    deadline: float | None,
) -> list[RequestRecord]:
    source = iter(prompts)
    records: list[RequestRecord] = []

    async def lane() -> None:
        while deadline is None or time.perf_counter() < deadline:
            prompt = next(source, None)
            if prompt is None:
                return
            records.append(await send(client, target, prompt))

    await asyncio.gather(*(lane() for _ in range(concurrency)))
    return records


async def _poll(
    client: httpx.AsyncClient, url: str, interval: float, out: list[EngineSample], stop: asyncio.Event
) -> None:
    while True:
        await _sample(client, url, out)
        try:
            await asyncio.wait_for(stop.wait(), timeout=interval)
            return
        except TimeoutError:
            continue


async def _sample(client: httpx.AsyncClient, url: str, out: list[EngineSample]) -> None:
    try:
        r = await client.get(url, timeout=5.0)
        if r.status_code == 200:
            out.append(parse_metrics(r.text))
    except httpx.HTTPError:
        pass  # a missed sample is not a failed measurement


async def run_level_async(target: Target, plan: LevelPlan) -> LevelRun:
    limits = httpx.Limits(
        max_connections=plan.concurrency + 4, max_keepalive_connections=plan.concurrency + 4
    )
    timeout = httpx.Timeout(plan.request_timeout_s, connect=10.0)
    async with httpx.AsyncClient(limits=limits, timeout=timeout) as client:
        if plan.warmup:
            await _closed_loop(client, target, plan.concurrency, plan.warmup, None)
        samples: list[EngineSample] = []
        stop = asyncio.Event()
        poller = (
            asyncio.create_task(_poll(client, plan.metrics_url, plan.metrics_interval_s, samples, stop))
            if plan.metrics_url
            else None
        )
        cpu0 = time.process_time()
        start = time.perf_counter()
        deadline = start + plan.duration_s if plan.duration_s is not None else None
        records = await _closed_loop(client, target, plan.concurrency, plan.prompts, deadline)
        end = max([start, *(r.end_time for r in records)])
        cpu = time.process_time() - cpu0
        if poller is not None:
            stop.set()
            await poller
            await _sample(client, plan.metrics_url, samples)  # counters after the last request
    return LevelRun(
        concurrency=plan.concurrency,
        window_start=start,
        window_end=end,
        records=tuple(records),
        engine_samples=tuple(samples),
        client_cpu_s=cpu,
    )


def run_level(target: Target, plan: LevelPlan) -> LevelRun:
    return asyncio.run(run_level_async(target, plan))


def take(prompts: Iterator[Prompt], n: int) -> tuple[Prompt, ...]:
    return tuple(islice(prompts, n))
