"""Plain frozen records that flow between the stages. No behaviour beyond derived properties."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One streamed request, as the load generator saw it. Failures are data (``success=False``).

    Times are ``time.perf_counter()`` seconds: CLOCK_MONOTONIC on Linux, one clock for every process
    of the machine, so records of several client processes merge. ``chunk_times[i]`` is when the i-th
    streamed chunk that carried output tokens arrived and ``chunk_tokens[i]`` how many tokens it
    carried (speculative decoding puts several tokens in one chunk). ``due_time`` is when an open loop's
    schedule had it due, so ``lag`` is the client's own delay. ``tokens_exact`` is False when
    the per-chunk counts could not be verified against the server's usage (see loadgen.client): the
    totals still are exact, the split over chunks (and so ITL) is not.
    """

    send_time: float
    end_time: float
    success: bool
    prompt_tokens: int = 0
    output_tokens: int = 0
    chunk_times: tuple[float, ...] = ()
    chunk_tokens: tuple[int, ...] = ()
    error: str = ""
    status_code: int | None = None
    tokens_exact: bool = True
    #: open loop (Poisson, a trace replay): when the schedule had the request due; None: closed loop
    due_time: float | None = None

    @property
    def lag(self) -> float | None:
        """Seconds the request was sent after it was due (open loop); None in a closed loop."""
        return None if self.due_time is None else self.send_time - self.due_time

    @property
    def ttft(self) -> float | None:
        return self.chunk_times[0] - self.send_time if self.chunk_times else None

    @property
    def e2e(self) -> float | None:
        return self.chunk_times[-1] - self.send_time if self.chunk_times else None

    @property
    def tpot(self) -> float | None:
        """(E2E - TTFT) / (output_tokens - 1); undefined for a single output token."""
        if not self.chunk_times or self.output_tokens < 2:
            return None
        return (self.chunk_times[-1] - self.chunk_times[0]) / (self.output_tokens - 1)

    def itls(self) -> list[float]:
        """One inter-token latency per token after the first chunk: the gap before a chunk divided
        by the tokens it carried, repeated for each of those tokens."""
        out: list[float] = []
        for i in range(1, len(self.chunk_times)):
            n = max(self.chunk_tokens[i], 1)
            out.extend([(self.chunk_times[i] - self.chunk_times[i - 1]) / n] * n)
        return out


@dataclass(frozen=True, slots=True)
class EngineSample:
    """One read of the engine's Prometheus ``/metrics``: values summed over label sets."""

    time: float
    values: dict[str, float] = field(default_factory=dict)
    accepted_per_pos: dict[int, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class LevelRun:
    """What the load generator returns for one concurrency level.

    The window runs from the first send (the earliest start of any client process) to the last
    completion over all processes. ``process_cpu_s`` is each client process's CPU seconds over the
    window; ``client_cpu_s`` their sum. ``client_bound`` says whether the busiest process used more
    than the client-bound share of its core (``loadgen.procs.CLIENT_BOUND_SHARE``) in the window
    that was kept; ``client_note`` says why and what was done about it (re-run with more processes,
    or why it could not be).
    """

    concurrency: int
    window_start: float
    window_end: float
    records: tuple[RequestRecord, ...]
    engine_samples: tuple[EngineSample, ...] = ()
    client_cpu_s: float = 0.0
    process_cpu_s: tuple[float, ...] = ()
    #: whether the window asked the server for running usage in every chunk (see loadgen.client)
    per_chunk_usage: bool = True
    client_bound: bool | None = None
    client_note: str = ""

    @property
    def processes(self) -> int:
        return max(len(self.process_cpu_s), 1)

    @property
    def busiest_cpu_s(self) -> float:
        return max(self.process_cpu_s, default=self.client_cpu_s)


@dataclass(frozen=True, slots=True)
class ReferenceOutputs:
    """What one server generated for the reference prompt set (greedy, one request at a time).

    ``token_ids[i]`` is the i-th prompt's generated ids; a failed request has ``()`` there and its
    message in ``errors[i]`` (``""`` when it succeeded). Both tuples have one entry per prompt.
    """

    token_ids: tuple[tuple[int, ...], ...]
    errors: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not any(self.errors)


@dataclass(frozen=True)
class Paired:
    """A trial measured again against the leader (``confirm``): per level, the headline metrics of the
    leader's windows and of the trial's, in the order they ran (pair k: leader first when k is even).
    ``leader`` is None for a trial confirmed alone (no leader was resident on its slot)."""

    leader: int | None
    #: how the leader waited between windows: sleep, keep (or "" when confirmed alone)
    park: str
    #: pairs measured per level, and why they stopped: separated, cap, or what cut them short
    pairs: int
    stopped: str
    #: seconds spent putting servers to sleep and waking them
    switch_s: float
    #: level -> (the leader's windows, the trial's windows)
    levels: dict[int, tuple[tuple[dict[str, float], ...], tuple[dict[str, float], ...]]]

    def as_dict(self) -> dict[str, object]:
        return {
            "leader": self.leader,
            "park": self.park,
            "pairs": self.pairs,
            "stopped": self.stopped,
            "switch_s": self.switch_s,
            "levels": {str(c): {"leader": list(a), "trial": list(b)} for c, (a, b) in self.levels.items()},
        }

    @classmethod
    def from_dict(cls, d: dict[str, object]) -> Paired:
        def windows(v: object) -> tuple[dict[str, float], ...]:
            rows = v if isinstance(v, list) else []
            return tuple({str(k): float(x) for k, x in w.items() if x is not None} for w in rows)

        raw = d["levels"]
        assert isinstance(raw, dict)
        leader = d.get("leader")
        return cls(
            leader=int(leader) if isinstance(leader, int) else None,
            park=str(d.get("park") or ""),
            pairs=int(d["pairs"]),  # type: ignore[call-overload]
            stopped=str(d.get("stopped") or ""),
            switch_s=float(d.get("switch_s") or 0.0),  # type: ignore[arg-type]
            levels={int(c): (windows(v.get("leader")), windows(v.get("trial"))) for c, v in raw.items()},
        )
