"""Plain frozen records that flow between the stages. No behaviour beyond derived properties."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One streamed request, as the load generator saw it. Failures are data (``success=False``).

    Times are ``time.perf_counter()`` seconds. ``chunk_times[i]`` is when the i-th streamed chunk that
    carried output tokens arrived and ``chunk_tokens[i]`` how many tokens it carried (counted exactly
    from the server's running usage; speculative decoding puts several tokens in one chunk).
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
    """What the load generator returns for one concurrency level."""

    concurrency: int
    window_start: float
    window_end: float
    records: tuple[RequestRecord, ...]
    engine_samples: tuple[EngineSample, ...] = ()
    client_cpu_s: float = 0.0


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
