"""A level over N client processes, and the check that the client is not what limits it.

``run_level(target, plan, cpus, processes)`` runs one level. With one process the share runs in the
caller's process (its event loop, the calling thread pinned to ``cpus``); with N it runs in N
processes, each with its own event loop and connections and pinned to its own part of ``cpus``.
Either way the same ``runner.run_share`` does the work and the same barrier starts the window
(``runner``'s docstring says how the work is split so that the merged records are exactly one
process's).

Client processes are started with ``spawn`` (never a bare fork of the threaded worker), live for one
level only, and cannot outlive it: the caller terminates them whatever happens (an interrupt
included), each asks the kernel for SIGKILL when its parent dies (``PR_SET_PDEATHSIG``), and each
exits when its control pipe to the parent closes.

``measure_level`` adds the client-bound check: when the busiest process used more than
``CLIENT_BOUND_SHARE`` of its core over the window, its timestamps may include its own queueing
and the level is client-bound. It is then run again, with new prompts, on more processes where the
cores allow; where they do not, it is kept with ``client_bound`` set and the reason in
``client_note``.
"""

from __future__ import annotations

import asyncio
import ctypes
import math
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from nova_search.loadgen.client import Target
from nova_search.loadgen.runner import (
    LevelPlan,
    LocalClaims,
    LocalDone,
    MetricsReader,
    PromptStream,
    Share,
    ShareResult,
    decide_usage,
    run_share,
    shares,
)
from nova_search.measure.records import LevelRun

#: how often (seconds) a level reports its finished requests to ``on_progress``
PROGRESS_INTERVAL_S = 0.5
#: called with the number of measured requests finished so far in the window
Progress = Callable[[int], None]

#: share of one core above which the busiest client process is taken to limit the measurement
CLIENT_BOUND_SHARE = 0.7
#: streamed chunks per second one process is planned for when the processes are chosen by rate: about
#: a fifth of what one core parses (``benchmarks/client_overhead.py``), so a process stays far below
#: the client-bound share
CHUNKS_PER_PROCESS = 25_000
#: requests in flight one process is planned for when no rate is known yet. Splitting is not free: on
#: one H200 at 512 in flight (benchmarks/results/crosscheck-h200, "Split or not"), 8 processes (the old
#: 64 a process) read lower than vLLM's client in all 4 pairs, both orders; one process, at 30 % of a
#: core, went both ways. A level is split for its rate, not its width
LANES_PER_PROCESS = 512
#: how far ahead of "now" the start time is set, so that every process has it before it comes
GO_MARGIN_S = 0.05
#: how long client processes get to start and finish their warmup, beyond the requests' own timeout
START_TIMEOUT_S = 120.0


class ClientError(RuntimeError):
    """A client process failed (not a request: those are data); the level has no result."""


def core_groups(cpus: Sequence[int] | None, n: int) -> list[tuple[int, ...] | None]:
    """``cpus`` split into ``n`` contiguous groups (one per process); with more processes than cores
    (only when asked for by hand), cores are shared round robin. None: nothing is pinned."""
    if not cpus:
        return [None] * n
    cores = list(cpus)
    if n > len(cores):
        return [(cores[k % len(cores)],) for k in range(n)]
    return [tuple(cores[k * len(cores) // n : (k + 1) * len(cores) // n]) for k in range(n)]


# -- one share in this process ----------------------------------------------------------------------


class _LocalControl:
    def __init__(self) -> None:
        loop = asyncio.get_running_loop()
        self.ready_seen: asyncio.Future[bool] = loop.create_future()
        self.go_at: asyncio.Future[tuple[float, bool]] = loop.create_future()
        self.started_at: asyncio.Future[float] = loop.create_future()

    async def ready(self, multi_token_chunks: bool) -> tuple[float, bool]:
        self.ready_seen.set_result(multi_token_chunks)
        return await self.go_at

    def started(self, at: float) -> None:
        self.started_at.set_result(at)


class _InProcess:
    """One share, as a task of the caller's event loop."""

    def __init__(self, target: Target, plan: LevelPlan, share: Share) -> None:
        self.control = _LocalControl()
        self.done = LocalDone()
        self.task = asyncio.create_task(
            run_share(target, plan, share, LocalClaims(), self.control, self.done)
        )

    async def ready(self) -> list[bool]:
        ready = asyncio.ensure_future(self.control.ready_seen)
        await asyncio.wait([ready, self.task], return_when=asyncio.FIRST_COMPLETED)
        if self.task.done():
            self.task.result()  # raises what the share raised
        return [ready.result()]

    def go(self, t0: float, per_chunk_usage: bool) -> None:
        self.control.go_at.set_result((t0, per_chunk_usage))

    async def window_start(self) -> float | None:
        """When the share's window started; None if it ended (raised) before."""
        started = asyncio.ensure_future(self.control.started_at)
        await asyncio.wait([started, self.task], return_when=asyncio.FIRST_COMPLETED)
        return started.result() if started.done() else None

    def done_count(self) -> int:
        return self.done.read()

    async def results(self) -> list[ShareResult]:
        return [await self.task]

    def close(self) -> None:
        self.task.cancel()


# -- shares in client processes ---------------------------------------------------------------------


class _SharedDone:
    """The level's count of finished requests in shared memory, added to by every client process."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def add(self) -> None:
        with self.value.get_lock():
            self.value.value += 1


class _SharedClaims:
    """A claim counter in shared memory (``multiprocessing.Value``), one per level."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def claim(self) -> int:
        with self.value.get_lock():
            i = int(self.value.value)
            self.value.value = i + 1
        return i


def _die_with_parent(parent_pid: int) -> None:
    """SIGKILL this process when its parent dies (Linux), and exit now if it already has."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent_pid:
        os._exit(3)


class _PipeControl:
    """The barrier, over the process's pipe to the parent. Once the window starts, anything from the
    parent (or the pipe closing) ends the process at once: the level is being abandoned."""

    def __init__(self, conn: multiprocessing.connection.Connection) -> None:
        self.conn = conn

    async def ready(self, multi_token_chunks: bool) -> tuple[float, bool]:
        self.conn.send(("ready", multi_token_chunks))
        loop = asyncio.get_running_loop()
        message = await loop.run_in_executor(None, self._recv)
        if not (isinstance(message, tuple) and message[0] == "go"):
            os._exit(4)
        loop.add_reader(self.conn.fileno(), os._exit, 5)
        return float(message[1]), bool(message[2])

    def started(self, at: float) -> None:
        pass  # the parent reads /metrics from t0, the start every process sleeps until

    def _recv(self) -> Any:
        try:
            return self.conn.recv()
        except (EOFError, OSError):
            os._exit(4)


def _worker(
    conn: multiprocessing.connection.Connection,
    parent_pid: int,
    cpus: tuple[int, ...] | None,
    target: Target,
    plan: LevelPlan,
    share: Share,
    claims_value: Any,
    done_value: Any,
) -> None:
    """A client process's main: one share of one level, its result sent back over ``conn``."""
    _die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    if cpus:
        os.sched_setaffinity(0, cpus)
    try:
        result = asyncio.run(
            run_share(
                target, plan, share, _SharedClaims(claims_value), _PipeControl(conn), _SharedDone(done_value)
            )
        )
        conn.send(("done", result))
    except BaseException as e:  # noqa: BLE001 - reported to the parent, which raises ClientError
        try:
            conn.send(("error", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))
        except OSError:
            pass
    finally:
        conn.close()


class _Spawned:
    """Shares in client processes, one each."""

    def __init__(
        self, target: Target, plan: LevelPlan, parts: list[Share], cpus: Sequence[int] | None
    ) -> None:
        ctx = multiprocessing.get_context("spawn")
        # kept on self: the children unpickle it after start(), and it must still exist then
        self.claims = claims = ctx.Value("q", 0, lock=True)
        self.done = done = ctx.Value("q", 0, lock=True)
        self.procs: list[Any] = []
        self.conns: list[multiprocessing.connection.Connection] = []
        self.timeout_s = START_TIMEOUT_S + plan.request_timeout_s
        self.t0: float | None = None
        groups = core_groups(cpus, len(parts))
        try:
            for share, group in zip(parts, groups, strict=True):
                here, there = ctx.Pipe()
                proc = ctx.Process(
                    target=_worker,
                    args=(there, os.getpid(), group, target, plan, share, claims, done),
                    name=f"nova-client-{share.index}",
                    daemon=True,
                )
                proc.start()
                there.close()
                self.procs.append(proc)
                self.conns.append(here)
        except BaseException:
            self.close()
            raise

    def _collect(self, kind: str, timeout_s: float | None) -> list[Any]:
        """One message of ``kind`` from every process, in share order; ClientError when a process
        reports an error, exits without answering, or none comes within ``timeout_s``."""
        got: dict[int, Any] = {}
        deadline = time.monotonic() + timeout_s if timeout_s is not None else None
        while len(got) < len(self.conns):
            waiting = [c for i, c in enumerate(self.conns) if i not in got]
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            ready = multiprocessing.connection.wait(waiting, timeout=left)
            if not ready:
                raise ClientError(f"client processes gave no {kind!r} within {timeout_s:.0f} s")
            for conn in ready:
                i = self.conns.index(conn)  # type: ignore[arg-type]
                try:
                    message = conn.recv()  # type: ignore[union-attr]
                except (EOFError, OSError):
                    code = self.procs[i].exitcode
                    raise ClientError(f"client process {i} exited ({code}) before {kind!r}") from None
                if message[0] == "error":
                    raise ClientError(f"client process {i} failed: {message[1]}")
                if message[0] != kind:
                    raise ClientError(f"client process {i} sent {message[0]!r}, expected {kind!r}")
                got[i] = message[1]
        return [got[i] for i in range(len(self.conns))]

    async def ready(self) -> list[bool]:
        return await asyncio.to_thread(self._collect, "ready", self.timeout_s)

    def go(self, t0: float, per_chunk_usage: bool) -> None:
        self.t0 = t0
        for conn in self.conns:
            conn.send(("go", t0, per_chunk_usage))

    async def window_start(self) -> float | None:
        return self.t0  # every process sleeps until it (GO_MARGIN_S ahead) and stamps its start after

    def done_count(self) -> int:
        return int(self.done.value)

    async def results(self) -> list[ShareResult]:
        return await asyncio.to_thread(self._collect, "done", None)

    def close(self) -> None:
        for conn in self.conns:
            conn.close()  # a process still in its window exits on this
        for proc in self.procs:
            proc.join(timeout=2.0)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=5.0)


# -- a level ------------------------------------------------------------------------------------------


async def _run(
    target: Target,
    plan: LevelPlan,
    parts: list[Share],
    cpus: Sequence[int] | None,
    out: list[tuple[list[ShareResult], MetricsReader | None, bool]],
    on_progress: Progress | None = None,
) -> None:
    """The level, its outcome appended to ``out``: ``asyncio.run`` on Python 3.11 formats the main
    task's repr (its result included) when it restores the SIGINT handler, which for a level's
    records costs tens of milliseconds. ``on_progress(done)`` is called with the measured requests
    finished so far every ``PROGRESS_INTERVAL_S`` of the window, and once at its end."""
    clients: _InProcess | _Spawned = (
        _InProcess(target, plan, parts[0]) if len(parts) == 1 else _Spawned(target, plan, parts, cpus)
    )
    reader = MetricsReader(plan.metrics_url) if plan.metrics_url else None
    try:
        multi = await clients.ready()
        per_chunk_usage = decide_usage(plan, any(multi))
        if reader is not None:
            await reader.read()  # before the window: never on top of its first requests
        t0 = time.perf_counter() + (GO_MARGIN_S if len(parts) > 1 else 0.0)
        clients.go(t0, per_chunk_usage)
        stop = asyncio.Event()
        poller = (
            asyncio.create_task(_poll(clients, reader, plan.metrics_interval_s, stop))
            if reader is not None
            else None
        )
        ticker = asyncio.create_task(_tick(clients, on_progress, stop)) if on_progress is not None else None
        results = await clients.results()
        if ticker is not None and on_progress is not None:
            stop.set()
            await ticker
            on_progress(clients.done_count())
        if poller is not None and reader is not None:
            stop.set()
            await poller
            await reader.read()  # counters after the last request
        out.append((results, reader, per_chunk_usage))
    finally:
        clients.close()
        if reader is not None:
            reader.close()


async def _poll(
    clients: _InProcess | _Spawned, reader: MetricsReader, interval: float, stop: asyncio.Event
) -> None:
    """Reads /metrics an interval after the window started (the share's own stamp when it runs in this
    process: a stall between ``t0`` and that stamp never puts a read on the first requests), then every
    interval until ``stop``."""
    start = await clients.window_start()
    if start is not None:
        await reader.poll(start + interval, interval, stop)


async def _tick(clients: _InProcess | _Spawned, on_progress: Progress, stop: asyncio.Event) -> None:
    """Reports the window's finished requests until ``stop``; a reporter that raises stops reporting,
    never the level."""
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), PROGRESS_INTERVAL_S)
        except TimeoutError:
            pass
        try:
            on_progress(clients.done_count())
        except Exception:  # noqa: BLE001 - progress is a view; the measurement goes on
            return


def run_level(
    target: Target,
    plan: LevelPlan,
    cpus: Sequence[int] | None = None,
    processes: int = 1,
    on_progress: Progress | None = None,
) -> LevelRun:
    """Run one level on ``processes`` client processes (1: in this process). With ``cpus``, the
    calling thread is pinned to them while the level runs (restored after), and the client processes
    each to their own contiguous part of them."""
    parts = shares(plan, processes)
    if len(parts) > 1 and not isinstance(plan.prompts, tuple | PromptStream):
        raise ValueError("several client processes need the prompts as a tuple or a PromptStream")
    before = os.sched_getaffinity(0) if cpus else None
    if cpus:
        os.sched_setaffinity(0, set(cpus))
    out: list[tuple[list[ShareResult], MetricsReader | None, bool]] = []
    try:
        asyncio.run(_run(target, plan, parts, cpus, out, on_progress))
    finally:
        if before is not None:
            os.sched_setaffinity(0, before)
    ((results, reader, per_chunk_usage),) = out
    records = [r for share in results for r in share.records]
    if len(results) > 1:
        records.sort(key=lambda r: r.end_time)  # completion order, as one process appends them
    start = min(share.start for share in results)
    end = max([start, *(r.end_time for r in records)])
    cpu = tuple(share.cpu_s for share in results)
    return LevelRun(
        concurrency=plan.concurrency,
        window_start=start,
        window_end=end,
        records=tuple(records),
        engine_samples=reader.samples() if reader is not None else (),
        client_cpu_s=sum(cpu),
        process_cpu_s=cpu,
        per_chunk_usage=per_chunk_usage,
    )


# -- how many processes, and the client-bound check -----------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClientPlan:
    """How the load generator runs: on which cores, and in how many processes (None: chosen per level
    from the cores and the expected rate; at most one per core)."""

    cpus: tuple[int, ...] | None = None
    processes: int | None = None
    #: re-run a client-bound level on more processes where the cores allow
    rerun: bool = True
    bound_share: float = CLIENT_BOUND_SHARE

    @property
    def max_processes(self) -> int:
        """One process per client core, or the processes asked for by hand if they are more."""
        return max(len(self.cpus or ()), self.processes or 1, 1)


def chunk_rate(run: LevelRun) -> float:
    """Streamed chunks with tokens per second over the window."""
    chunks = sum(len(r.chunk_times) for r in run.records)
    return chunks / max(run.window_end - run.window_start, 1e-9)


def auto_processes(client: ClientPlan, width: int, expected_chunks_per_s: float | None) -> int:
    """Processes for a level of ``width`` requests in flight: enough for LANES_PER_PROCESS lanes each,
    and for CHUNKS_PER_PROCESS chunks/s each at the expected rate, at most one per client core (one
    when no cores are given) and one per request in flight."""
    cores = len(client.cpus) if client.cpus else 1
    want = math.ceil(width / LANES_PER_PROCESS)
    if expected_chunks_per_s:
        want = max(want, math.ceil(expected_chunks_per_s / CHUNKS_PER_PROCESS))
    return max(1, min(want, cores, width))


def busiest_share(run: LevelRun) -> float:
    return run.busiest_cpu_s / max(run.window_end - run.window_start, 1e-9)


def measure_level(
    target: Target,
    plan_for: Callable[[int], LevelPlan],
    client: ClientPlan,
    expected_chunks_per_s: float | None = None,
    on_progress: Progress | None = None,
) -> LevelRun:
    """Run a level (``plan_for(0)``) and check that the client did not limit it. A client-bound window
    is run again with ``plan_for(attempt)`` (new prompts: the server's prefix cache has seen the first
    ones) on more processes, up to the cores given; the last window is returned, flagged when it is
    still client-bound, with the reason."""
    plan = plan_for(0)
    if client.processes is not None:
        n = max(1, min(client.processes, client.max_processes, plan.max_in_flight))
    else:
        n = auto_processes(client, plan.max_in_flight, expected_chunks_per_s)
    limit = max(1, min(client.max_processes, plan.max_in_flight))
    notes: list[str] = []
    attempt = 0
    while True:
        run = run_level(target, plan, client.cpus, n, on_progress)
        share = busiest_share(run)
        if share <= client.bound_share:
            note = "; ".join(notes)
            return replace(run, client_bound=False, client_note=note)
        what = (
            f"the busiest of {run.processes} client process(es) used {share:.0%} of a core "
            f"(client-bound above {client.bound_share:.0%})"
        )
        more = min(limit, max(n + 1, math.ceil(n * share / (client.bound_share / 2))))
        if not client.rerun or more <= n:
            why = (
                "re-running is off"
                if not client.rerun
                else f"no more cores to spread it over ({_cores_text(client)})"
            )
            notes.append(f"{what}; kept flagged: {why}")
            return replace(run, client_bound=True, client_note="; ".join(notes))
        notes.append(f"{what}; re-run on {more} processes")
        attempt += 1
        n = more
        plan = plan_for(attempt)


def _cores_text(client: ClientPlan) -> str:
    if not client.cpus:
        return "no client cores given: set sweep.client_cpus (bench --cpus) to let it use more processes"
    return f"{len(client.cpus)} client core(s): {','.join(map(str, client.cpus))}"
