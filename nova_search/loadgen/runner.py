"""One level of load: closed loop (N requests in flight until the level's requests or duration are
done) or open loop (Poisson arrivals at a rate, or a trace's schedule: ``loadgen.replay``; capped in
flight), driven by client processes (``loadgen.procs``) each running a *share* with ``run_share``.

A level, whatever the number of processes:

1. every share runs its part of the warmup (excluded), then opens its lanes' connections (unless
   ``preconnect`` is off). The warmup is one round: at most one request per request in flight, all
   sent at once, so it costs about one request's latency at every level (eight warmups at
   concurrency 1 would be eight requests end to end, longer than a short window);
2. once every share is ready (a barrier), the engine's /metrics is read once, *before* the window,
   so that read never lands on the window's first requests; then every share is told one start time
   ``t0`` on the machine's one monotonic clock and starts at it;
3. the shares split the work so that their merged requests are exactly what one process would have
   sent: closed loop, each lane claims the next prompt index from a counter the shares have in
   common (request count: every prompt once; duration: a prefix of the stream, none skipped);
   open loop, every share computes the same schedule and sends the arrivals whose index it owns
   (index mod shares), so the rate is split and the merged arrivals are one schedule;
4. while the window is open, /metrics is read every ``metrics_interval_s`` from one interval after
   its start (the share's own stamp in this process, so a stall between ``t0`` and that stamp never
   puts a read on the first requests; ``t0`` with client processes, which sleep until it); the text
   is kept and parsed after the window (the Prometheus parser is slow and must not delay chunk
   timestamps), and read once more after the last request.

The window runs from the earliest share start to the last completion.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from itertools import islice
from typing import Protocol

import numpy as np

from nova_search.engine.probe import parse_metrics
from nova_search.loadgen.client import Target, send
from nova_search.loadgen.http import Pool
from nova_search.loadgen.inputs import Prompt, PromptSource
from nova_search.measure.records import EngineSample, RequestRecord
from nova_search.measure.slo import MissCount, MissRule
from nova_search.spec import ArrivalSpec, ClosedArrival, PoissonArrival


@dataclass(frozen=True, slots=True)
class PromptStream:
    """A picklable, re-iterable prompt stream: ``source.prompts(seed)``, the first ``count`` of them
    (None: endless, for duration-bound windows). Every client process iterates its own copy."""

    source: PromptSource
    seed: int
    count: int | None = None

    def __iter__(self) -> Iterator[Prompt]:
        prompts = self.source.prompts(self.seed)
        return islice(prompts, self.count) if self.count is not None else prompts


Prompts = tuple[Prompt, ...] | PromptStream | Iterator[Prompt]


@dataclass(frozen=True, slots=True)
class LevelPlan:
    #: the level's key; closed loop: requests in flight; Poisson: the in-flight cap unless the
    #: arrival gives ``max_in_flight``
    concurrency: int
    warmup: tuple[Prompt, ...]
    #: a finite tuple or ``PromptStream`` with a count (request count), or an endless stream bounded by
    #: ``duration_s``. Several processes need a tuple or a PromptStream (an iterator cannot be shared).
    prompts: Prompts
    duration_s: float | None = None
    request_timeout_s: float = 300.0
    metrics_url: str | None = None
    metrics_interval_s: float = 0.5
    arrival: ArrivalSpec = ClosedArrival()
    #: seeds the Poisson gaps
    arrival_seed: int = 0
    #: a trace replay: request j is due ``schedule[j]`` seconds after the window opens (the trace at
    #: the level's speed, ``loadgen.replay``); None: as ``arrival`` says
    schedule: tuple[float, ...] | None = None
    #: ask for running usage in every chunk (exact tokens per chunk; costs the server CPU). None:
    #: decided by the warmup: only when a warmup request showed chunks of several tokens (or there is
    #: no warmup), see loadgen.client
    per_chunk_usage: bool | None = None
    #: open every lane's connection before the window, so that no measured request pays for
    #: connecting; False: connections are those the warmup opened, the others are opened by the
    #: window's first requests, as ``vllm bench serve`` does (the cross-check uses it)
    preconnect: bool = True
    #: failed requests the level tolerates (its error budget: sweep.max_error_rate of its requests);
    #: one more and the level is abandoned: nothing more is sent and the requests in flight are
    #: cancelled (a wedged server fails the level in about one request timeout, not one per request).
    #: None: no budget (every planned request is sent)
    max_errors: int | None = None
    #: the capacity search's SLO allowances (``measure.slo.MissRule``): once the requests that miss the
    #: SLO pass them, the level is clearly over saturation and is abandoned as a spent error budget is;
    #: None: every planned request is sent
    miss_rule: MissRule | None = None

    @property
    def max_in_flight(self) -> int:
        """The most requests in flight at once: the concurrency, or a Poisson or trace arrival's cap."""
        cap = getattr(self.arrival, "max_in_flight", None)
        return cap if cap is not None else self.concurrency


@dataclass(frozen=True, slots=True)
class Share:
    """What one client process does of a level: share ``index`` of ``of``."""

    index: int
    of: int
    #: closed loop: its lanes; Poisson: its part of the in-flight cap
    lanes: int
    warmup: tuple[Prompt, ...]


def split(total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` near-equal integers, larger first."""
    return [total // parts + (1 if k < total % parts else 0) for k in range(parts)]


def shares(plan: LevelPlan, processes: int) -> list[Share]:
    """The level split over ``processes`` (at most one per request in flight); the warmup is one round,
    its first ``max_in_flight`` requests."""
    n = max(1, min(processes, plan.max_in_flight))
    warmup = plan.warmup[: plan.max_in_flight]
    return [
        Share(index=k, of=n, lanes=lanes, warmup=warmup[k::n])
        for k, lanes in enumerate(split(plan.max_in_flight, n))
    ]


@dataclass(frozen=True, slots=True)
class ShareResult:
    records: tuple[RequestRecord, ...]
    #: ``perf_counter`` when the share started its window (just after ``t0``)
    start: float
    #: CPU seconds of the share's process (``time.process_time``) from its start to its last completion
    cpu_s: float


class Claims(Protocol):
    """The next prompt index of a closed loop, shared by every share of a level."""

    def claim(self) -> int: ...


class LocalClaims:
    def __init__(self) -> None:
        self._next = 0

    def claim(self) -> int:
        i = self._next
        self._next = i + 1
        return i


class Done(Protocol):
    """The level's count of measured requests finished, shared by every share of a level: the caller
    reads it for progress (``procs.run_level``'s ``on_progress``)."""

    def add(self) -> None: ...


class LocalDone:
    def __init__(self) -> None:
        self.value = 0

    def add(self) -> None:
        self.value += 1

    def read(self) -> int:
        return self.value


class Control(Protocol):
    """How a share meets the barrier: says it is ready (and whether its warmup saw chunks of several
    tokens), learns the start time and whether to ask for running usage, and says when its window
    started (the engine's /metrics are first read an interval after that, never on its first
    requests)."""

    async def ready(self, multi_token_chunks: bool) -> tuple[float, bool]: ...

    def started(self, at: float) -> None: ...


class _Cursor:
    """Prompt ``i`` of a level's prompts, for indices that only grow (one share's claims)."""

    def __init__(self, prompts: Iterable[Prompt]) -> None:
        self._seq = prompts if isinstance(prompts, tuple) else None
        self._it = iter(prompts) if self._seq is None else None
        self._pos = 0

    def at(self, i: int) -> Prompt | None:
        if self._seq is not None:
            return self._seq[i] if i < len(self._seq) else None
        assert self._it is not None
        while self._pos < i:  # another share's prompts: drawn (the stream is one) and dropped
            if next(self._it, None) is None:
                return None
            self._pos += 1
        self._pos = i + 1
        return next(self._it, None)


# -- one share -------------------------------------------------------------------------------------


async def _warm(pool: Pool, target: Target, share: Share, per_chunk_usage: bool, timeout_s: float) -> bool:
    """The share's warmup (closed loop at its lanes); whether any request showed several tokens in a
    chunk it could not count exactly."""
    queue = list(share.warmup)[::-1]
    seen: list[RequestRecord] = []

    async def lane() -> None:
        while queue:
            seen.append(await send(pool, target, queue.pop(), per_chunk_usage, timeout_s))

    await asyncio.gather(*(lane() for _ in range(min(share.lanes, len(queue)))))
    return any(r.success and not r.tokens_exact for r in seen)


class ErrorBudget:
    """A share's error budget: ``allowed`` failed requests (None: no budget); one more spends it. With a
    ``miss_rule``, requests that miss the SLO past its allowances spend it too (``measure.slo``)."""

    def __init__(self, allowed: int | None, miss_rule: MissRule | None = None) -> None:
        self.allowed = allowed
        self.failed = 0
        self.misses = MissCount(miss_rule) if miss_rule is not None else None
        self.spent = asyncio.Event()

    def record(self, r: RequestRecord) -> None:
        if not r.success:
            self.failed += 1
            if self.allowed is not None and self.failed > self.allowed:
                self.spent.set()
        if self.misses is not None and self.misses.record(r):
            self.spent.set()


async def _until_done_or_spent(tasks: list[asyncio.Task[None]], budget: ErrorBudget) -> None:
    """Wait for ``tasks``; once the budget is spent, cancel those still running (requests in flight)."""
    spent = asyncio.create_task(budget.spent.wait())
    try:
        pending = set(tasks)
        while pending and not budget.spent.is_set():
            _, pending = await asyncio.wait(pending | {spent}, return_when=asyncio.FIRST_COMPLETED)
            pending.discard(spent)
        for t in pending:
            t.cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        spent.cancel()
    for r in results:
        if isinstance(r, BaseException) and not isinstance(r, asyncio.CancelledError):
            raise r


async def _closed_loop(
    pool: Pool,
    target: Target,
    lanes: int,
    prompts: Iterable[Prompt],
    claims: Claims,
    deadline: float | None,
    per_chunk_usage: bool,
    timeout_s: float,
    done: Done | None = None,
    budget: ErrorBudget | None = None,
) -> list[RequestRecord]:
    cursor = _Cursor(prompts)
    records: list[RequestRecord] = []
    budget = budget or ErrorBudget(None)

    async def lane() -> None:
        # the deadline is checked before the claim, so every claimed index is sent: the merged
        # requests of all shares are a prefix of the stream, with no index skipped (unless the
        # error budget is spent: the level is abandoned, its requests in flight cancelled)
        while (deadline is None or time.perf_counter() < deadline) and not budget.spent.is_set():
            prompt = cursor.at(claims.claim())
            if prompt is None:
                return
            record = await send(pool, target, prompt, per_chunk_usage, timeout_s)
            records.append(record)
            budget.record(record)
            if done is not None:
                done.add()

    await _until_done_or_spent([asyncio.create_task(lane()) for _ in range(lanes)], budget)
    return records


def poisson_gaps(rate: float, seed: int) -> Iterator[float]:
    """Seeded exponential gaps (seconds) between arrivals at ``rate`` per second."""
    rng = np.random.default_rng(seed)
    while True:
        yield float(rng.exponential(1.0 / rate))


def poisson_offsets(rate: float, seed: int) -> Iterator[float]:
    """A Poisson schedule: arrival 0 at 0, each next one a seeded exponential gap after the one before."""
    due = 0.0
    for gap in poisson_gaps(rate, seed):
        yield due
        due += gap


async def _open_loop(
    pool: Pool,
    target: Target,
    offsets: Iterable[float],
    share: Share,
    prompts: Iterable[Prompt],
    start: float,
    deadline: float | None,
    per_chunk_usage: bool,
    timeout_s: float,
    done: Done | None = None,
    budget: ErrorBudget | None = None,
) -> list[RequestRecord]:
    """Open loop: arrival j due ``offsets[j]`` seconds after ``start`` (a Poisson schedule, or a trace's
    at the level's speed); this share sends the arrivals whose index is ``share.index`` mod
    ``share.of`` (every share computes the same schedule, so together they send it all, at the full
    rate). A request due while the share's ``lanes`` are out waits for one to finish and goes at once
    (the schedule is not shifted, as ``vllm bench serve --max-concurrency`` does); each record keeps
    its due time, so its lag is known. With a deadline, nothing is sent at or after it; the requests
    out are awaited. The window ends when the prompts or the schedule run out."""
    source = iter(prompts)
    slots = asyncio.Semaphore(max(share.lanes, 1))
    records: list[RequestRecord] = []
    tasks: list[asyncio.Task[None]] = []

    budget = budget or ErrorBudget(None)

    async def one(prompt: Prompt, due: float) -> None:
        try:
            record = await send(pool, target, prompt, per_chunk_usage, timeout_s)
            records.append(replace(record, due_time=due))
            budget.record(record)
            if done is not None:
                done.add()
        finally:
            slots.release()

    async def acquire() -> bool:
        """A free lane; False once the error budget is spent (nothing more is sent)."""
        got = asyncio.create_task(slots.acquire())
        spent = asyncio.create_task(budget.spent.wait())
        await asyncio.wait({got, spent}, return_when=asyncio.FIRST_COMPLETED)
        spent.cancel()
        if got.done() and not budget.spent.is_set():
            return True
        if got.done():
            slots.release()
        else:
            got.cancel()
        return False

    for j, offset in enumerate(offsets):
        due = start + offset
        if (deadline is not None and due >= deadline) or budget.spent.is_set():
            break
        prompt = next(source, None)
        if prompt is None:
            break
        if j % share.of == share.index:
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            if not await acquire():
                break
            if deadline is not None and time.perf_counter() >= deadline:
                slots.release()
                break
            tasks.append(asyncio.create_task(one(prompt, due)))
    await _until_done_or_spent(tasks, budget)
    return records


async def run_share(
    target: Target,
    plan: LevelPlan,
    share: Share,
    claims: Claims,
    control: Control,
    done: Done | None = None,
) -> ShareResult:
    """One share of a level: warmup, barrier, window. The same code runs in the caller's process (one
    share) and in each client process (several); each measured request that finishes adds to ``done``."""
    pool = Pool(target.base_url)
    try:
        warm_usage = plan.per_chunk_usage if plan.per_chunk_usage is not None else False
        multi = False
        if share.warmup:
            multi = await _warm(pool, target, share, warm_usage, plan.request_timeout_s)
        if plan.preconnect:
            await pool.prefill(share.lanes)
        prompts = plan.prompts
        if isinstance(prompts, PromptStream) and prompts.count is not None:
            prompts = tuple(prompts)  # made before the window: no prompt is generated while measuring
        t0, per_chunk_usage = await control.ready(multi)
        delay = t0 - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        start = time.perf_counter()
        control.started(start)
        cpu0 = time.process_time()
        deadline = t0 + plan.duration_s if plan.duration_s is not None else None
        # the level's error budget: a share abandons once its own failures pass the whole level's
        # budget (the level fails then whatever the other shares do; a share's part of it would fail
        # levels that pass, the failures spread unevenly); the same for the SLO's misses
        budget = ErrorBudget(plan.max_errors, plan.miss_rule)
        if plan.schedule is not None or isinstance(plan.arrival, PoissonArrival):
            offsets = plan.schedule
            if offsets is None:
                assert isinstance(plan.arrival, PoissonArrival)
                offsets = poisson_offsets(plan.arrival.rate, plan.arrival_seed)  # type: ignore[assignment]
            timeout_s = plan.request_timeout_s
            args = (offsets, share, prompts, t0, deadline, per_chunk_usage, timeout_s, done, budget)
            records = await _open_loop(pool, target, *args)
        else:
            records = await _closed_loop(
                pool,
                target,
                share.lanes,
                prompts,
                claims,
                deadline,
                per_chunk_usage,
                plan.request_timeout_s,
                done,
                budget,
            )
        cpu = time.process_time() - cpu0
    finally:
        pool.close()
    return ShareResult(records=tuple(records), start=start, cpu_s=cpu)


def decide_usage(plan: LevelPlan, multi_token_chunks: bool) -> bool:
    """Whether the window asks for running usage in every chunk."""
    if plan.per_chunk_usage is not None:
        return plan.per_chunk_usage
    return multi_token_chunks or not plan.warmup


# -- the engine's /metrics ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RawSample:
    time: float
    text: str


class MetricsReader:
    """Reads /metrics as text (cheap); ``samples()`` parses them once the window is over."""

    def __init__(self, url: str, headers: dict[str, str] | None = None) -> None:
        base, _, path = url.partition("://")
        host, _, rest = path.partition("/")
        self._pool = Pool(f"{base}://{host}")
        self._path = "/" + rest
        self._headers = headers or {}
        self.raw: list[RawSample] = []

    async def read(self) -> None:
        at = time.perf_counter()
        reply = await self._pool.get(self._path, self._headers, 5.0)
        if reply.status == 200 and not reply.error:
            self.raw.append(RawSample(at, reply.body.decode(errors="replace")))
        # a missed sample is not a failed measurement

    async def poll(self, first_at: float, interval: float, stop: asyncio.Event) -> None:
        """Read at ``first_at``, then every ``interval``, until ``stop``."""
        due = first_at
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), timeout=max(due - time.perf_counter(), 0.0))
                return
            except TimeoutError:
                pass
            await self.read()
            due += interval

    def samples(self) -> tuple[EngineSample, ...]:
        out = []
        for raw in self.raw:
            try:
                out.append(parse_metrics(raw.text, at=raw.time))
            except ValueError:
                continue  # a malformed read is a missed sample
        return tuple(out)

    def close(self) -> None:
        self._pool.close()


def take(prompts: Iterator[Prompt], n: int) -> tuple[Prompt, ...]:
    return tuple(islice(prompts, n))
