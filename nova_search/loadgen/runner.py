"""One level of load: closed loop (N requests in flight until the level's requests or duration are
done) or Poisson arrivals (open loop at a rate, capped in flight).

A warmup runs first and is excluded (closed loop, at the level's concurrency, or at the Poisson
cap). While the window is open, a poller samples the engine's /metrics (gauges need reads during
load: a read before it shows 0).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice

import httpx
import numpy as np

from nova_search.engine.probe import parse_metrics
from nova_search.loadgen.client import Target, send
from nova_search.loadgen.workload import Prompt
from nova_search.records import EngineSample, LevelRun, RequestRecord
from nova_search.spec import ArrivalSpec, ClosedArrival, PoissonArrival


@dataclass(frozen=True, slots=True)
class LevelPlan:
    #: the level's key; closed loop: requests in flight; Poisson: the in-flight cap unless the
    #: arrival gives ``max_in_flight``
    concurrency: int
    warmup: tuple[Prompt, ...]
    #: a finite tuple (request count) or an endless iterator bounded by duration_s
    prompts: tuple[Prompt, ...] | Iterator[Prompt]
    duration_s: float | None = None
    request_timeout_s: float = 300.0
    metrics_url: str | None = None
    metrics_interval_s: float = 0.5
    arrival: ArrivalSpec = ClosedArrival()
    #: seeds the Poisson gaps
    arrival_seed: int = 0

    @property
    def max_in_flight(self) -> int:
        """The most requests in flight at once: the concurrency, or a Poisson arrival's cap."""
        if isinstance(self.arrival, PoissonArrival) and self.arrival.max_in_flight is not None:
            return self.arrival.max_in_flight
        return self.concurrency


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


def poisson_gaps(rate: float, seed: int) -> Iterator[float]:
    """Seeded exponential gaps (seconds) between arrivals at ``rate`` per second."""
    rng = np.random.default_rng(seed)
    while True:
        yield float(rng.exponential(1.0 / rate))


async def _poisson(
    client: httpx.AsyncClient,
    target: Target,
    rate: float,
    max_in_flight: int,
    prompts: tuple[Prompt, ...] | Iterator[Prompt],
    deadline: float | None,
    seed: int,
) -> list[RequestRecord]:
    """Open loop: the first request at once, each next one a seeded exponential gap after the one
    before it was due. A request due while ``max_in_flight`` are out waits for one to finish and
    goes at once (the schedule is not shifted, as ``vllm bench serve --max-concurrency`` does).
    With a deadline, nothing is sent at or after it; the requests out are awaited."""
    source = iter(prompts)
    gaps = poisson_gaps(rate, seed)
    slots = asyncio.Semaphore(max_in_flight)
    records: list[RequestRecord] = []
    tasks: list[asyncio.Task[None]] = []

    async def one(prompt: Prompt) -> None:
        try:
            records.append(await send(client, target, prompt))
        finally:
            slots.release()

    due = time.perf_counter()
    while deadline is None or due < deadline:
        prompt = next(source, None)
        if prompt is None:
            break
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        await slots.acquire()
        if deadline is not None and time.perf_counter() >= deadline:
            slots.release()
            break
        tasks.append(asyncio.create_task(one(prompt)))
        due += next(gaps)
    await asyncio.gather(*tasks)
    return records


async def _load(
    client: httpx.AsyncClient, target: Target, plan: LevelPlan, deadline: float | None
) -> list[RequestRecord]:
    if isinstance(plan.arrival, PoissonArrival):
        return await _poisson(
            client,
            target,
            plan.arrival.rate,
            plan.max_in_flight,
            plan.prompts,
            deadline,
            plan.arrival_seed,
        )
    return await _closed_loop(client, target, plan.concurrency, plan.prompts, deadline)


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
    width = plan.max_in_flight
    limits = httpx.Limits(max_connections=width + 4, max_keepalive_connections=width + 4)
    timeout = httpx.Timeout(plan.request_timeout_s, connect=10.0)
    async with httpx.AsyncClient(limits=limits, timeout=timeout) as client:
        if plan.warmup:
            await _closed_loop(client, target, width, plan.warmup, None)
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
        records = await _load(client, target, plan, deadline)
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


def run_level(target: Target, plan: LevelPlan, cpus: tuple[int, ...] | list[int] | None = None) -> LevelRun:
    """Run one level. With ``cpus``, the calling thread (the load generator's event loop) is pinned to
    those cores while it measures, then restored."""
    if not cpus:
        return asyncio.run(run_level_async(target, plan))
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, set(cpus))
    try:
        return asyncio.run(run_level_async(target, plan))
    finally:
        os.sched_setaffinity(0, before)


def take(prompts: Iterator[Prompt], n: int) -> tuple[Prompt, ...]:
    return tuple(islice(prompts, n))
