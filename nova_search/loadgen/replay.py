"""A trace replayed: its prompts (``TraceSource``), each window's schedule at a speed, and the check
that the client kept to it (``flag_late``).

Prompts. Request i asks for exactly the trace's ``input_len[i]`` prompt tokens (cut to
``workload.input_len`` when that is given) and ``output_len[i]`` output tokens (``ignore_eos``).
Its prompt is its ``hash_ids`` blocks in order, block ``h`` being ``block_size`` token ids drawn
from ``(seed, h)`` alone: a block that recurs in the trace is the same tokens in every prompt that
has it, so two prompts that share their first k hash ids share their first k blocks of tokens, and the
server's prefix cache finds what production's found. The tokens past the blocks (all of them in a
trace without hash_ids) are drawn from ``(seed, i)``: the request's own. Every window draws with its
own seed, so the cache never carries one window's blocks into the next; within a window the sharing
is the trace's. A block whose first use lies before the window's slice is new to the server there
(production may have had it cached).

Schedule. A window replays the slice of the trace from ``workload.trace_start_s``: its first
``sweep.requests`` requests, or (``sweep.duration_s``) those due within the window at the level's
speed. Request j of the slice is due ``(at[j] - at[first]) / speed`` seconds after the window opens;
speed 2 sends the same requests in half the time.

Keeping to it. The open loop (``loadgen.runner``) stamps each request's due time on its record; a
request sent late (the client busy, or the in-flight cap reached) has a lag. A window whose p99 lag
passes ``arrival.max_lag_ms`` is stored client-bound, and its note says how late and why: it
measured another arrival pattern than the trace's, and is never passed off as the trace's.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import numpy as np

from nova_search.errors import SpecError
from nova_search.loadgen.inputs import Prompt, id_range
from nova_search.loadgen.trace import Trace, read_trace
from nova_search.measure.records import LevelRun, RequestRecord
from nova_search.spec import SweepSpec, TraceArrival, WorkloadSpec

#: separate streams of the seed: a block's tokens, a request's own tokens
_BLOCK_STREAM, _OWN_STREAM = 0xB10C, 0x0A1E


def first_index(trace: Trace, start_s: float) -> int:
    """The first request at or after ``start_s`` (``workload.trace_start_s``). Raises SpecError."""
    first = int(np.searchsorted(trace.at, start_s, side="left"))
    if first >= len(trace):
        raise SpecError(
            f"workload.trace_start_s: {start_s:g} s is past the last request of {trace.path} "
            f"(at {trace.duration_s:g} s)"
        )
    return first


def slice_len(trace: Trace, first: int, speed: float, requests: int | None, duration_s: float | None) -> int:
    """How many requests a window replays from ``first``: ``requests`` of them, or those due within
    ``duration_s`` at ``speed`` (never past the trace's end)."""
    if requests is not None:
        return min(requests, len(trace) - first)
    at = trace.at[first:] - trace.at[first]
    return int(np.searchsorted(at / speed, duration_s or 0.0, side="left"))


class TraceSource:
    """The trace's prompts, in its order from the slice's first request (and round again from the
    trace's first when the trace is used up: a closed-loop window on a trace workload)."""

    def __init__(self, workload: WorkloadSpec, trace: Trace, vocab: int) -> None:
        self.trace = trace
        self.cap = workload.input_len if isinstance(workload.input_len, int) else None
        self.low, self.high = id_range(vocab)
        self.first = first_index(trace, workload.trace_start_s)

    def prompt(self, i: int, seed: int, blocks: dict[int, tuple[int, ...]] | None = None) -> Prompt:
        """Request ``i`` of the trace, its tokens drawn from ``seed`` (``blocks``: the blocks drawn so
        far with this seed, added to)."""
        t = self.trace
        n = int(t.input_len[i])
        if self.cap is not None:
            n = min(n, self.cap)
        blocks = {} if blocks is None else blocks
        ids: list[int] = []
        for h in t.hash_ids[i]:
            if len(ids) >= n:
                break
            block = blocks.get(h)
            if block is None:
                rng = np.random.default_rng([seed, _BLOCK_STREAM, h])
                block = blocks[h] = tuple(rng.integers(self.low, self.high, size=t.block_size).tolist())
            ids.extend(block)
        if len(ids) < n:
            rng = np.random.default_rng([seed, _OWN_STREAM, i])
            ids.extend(rng.integers(self.low, self.high, size=n - len(ids)).tolist())
        return Prompt(token_ids=tuple(ids[:n]), output_len=int(t.output_len[i]))

    def prompts(self, seed: int) -> Iterator[Prompt]:
        blocks: dict[int, tuple[int, ...]] = {}
        i = self.first
        while True:
            yield self.prompt(i, seed, blocks)
            i = (i + 1) % len(self.trace)

    def schedule(self, speed: float, requests: int | None, duration_s: float | None) -> tuple[float, ...]:
        """When each request of a window's slice is due, seconds after the window opens, at ``speed``."""
        n = slice_len(self.trace, self.first, speed, requests, duration_s)
        at = self.trace.at[self.first : self.first + n]
        return tuple(((at - self.trace.at[self.first]) / speed).tolist())


def check_window(trace: Trace, workload: WorkloadSpec, sweep: SweepSpec) -> None:
    """Every window of a replay has its slice: ``sweep.requests`` requests from
    ``workload.trace_start_s`` on, or at least two within ``sweep.duration_s`` at the slowest speed.
    Raises SpecError naming the field."""
    first = first_index(trace, workload.trace_start_s)
    left = len(trace) - first
    if sweep.requests is not None and sweep.requests > left:
        raise SpecError(
            f"sweep.requests: {sweep.requests} requests a window, but {trace.path} has {left} from "
            f"workload.trace_start_s on; give at most {left} or an earlier trace_start_s"
        )
    if sweep.duration_s is not None:
        slowest = min(sweep.speeds or [1.0])
        if slice_len(trace, first, slowest, None, sweep.duration_s) < 2:
            raise SpecError(
                f"sweep.duration_s: a window of {sweep.duration_s:g} s at speed {slowest:g} holds fewer "
                f"than 2 requests of {trace.path}; give a longer window"
            )


def read_checked(workload: WorkloadSpec, sweep: SweepSpec) -> Trace:
    """A trace workload's trace, read and checked against the sweep (a replay's windows each have
    their slice). Raises SpecError naming the field."""
    assert workload.kind == "trace" and workload.path is not None
    trace = read_trace(workload.path, workload.trace_format, workload.block_size)
    first_index(trace, workload.trace_start_s)
    if isinstance(workload.arrival, TraceArrival):
        check_window(trace, workload, sweep)
    return trace


def max_in_flight(records: tuple[RequestRecord, ...]) -> int:
    """The most requests that were out at once."""
    events = sorted([(r.send_time, 1) for r in records] + [(r.end_time, -1) for r in records])
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def lateness(records: tuple[RequestRecord, ...], arrival: TraceArrival) -> str | None:
    """Why a window did not keep to its schedule (None when it did): its p99 lag past
    ``arrival.max_lag_ms``, how many requests were late and by how much, and the likely cause."""
    lags = np.array([lag for r in records if (lag := r.lag) is not None]) * 1000.0
    if not lags.size:
        return None
    p99 = float(np.percentile(lags, 99))
    if p99 <= arrival.max_lag_ms:
        return None
    late = int((lags > arrival.max_lag_ms).sum())
    most = max_in_flight(records)
    why = (
        f"the in-flight cap was reached ({most} out at once, workload.arrival.max_in_flight "
        f"{arrival.max_in_flight}): a request due at the cap waited for a slot"
        if most >= arrival.max_in_flight
        else "the client could not send on time (its own CPU or event loop)"
    )
    return (
        f"sends fell behind the trace's schedule: p99 lag {p99:.1f} ms (workload.arrival.max_lag_ms "
        f"{arrival.max_lag_ms:g}), {late} of {lags.size} requests late, the latest by {lags.max():.1f} ms; "
        f"{why}"
    )


def flag_late(run: LevelRun, arrival: TraceArrival) -> LevelRun:
    """The window, client-bound with the reason when its sends fell behind the schedule."""
    why = lateness(run.records, arrival)
    if why is None:
        return run
    note = "; ".join(n for n in (run.client_note, why) if n)
    return replace(run, client_bound=True, client_note=note)
