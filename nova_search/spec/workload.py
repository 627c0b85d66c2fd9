"""What each request sends (the workload) and how each level is measured (the sweep)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)

from nova_search.spec._base import StrictModel, as_cores, check_range

# ---------------------------------------------------------------- workload, sweep


#: the most tokens a prompt or an output may ask for
MAX_TOKENS = 10_000_000
#: the most requests in flight a level may ask for
MAX_CONCURRENCY = 100_000


class LenRange(StrictModel):
    """A length drawn uniformly from [low, high] (both inclusive). ``dist`` may be left out."""

    dist: Literal["uniform"] = "uniform"
    low: int = Field(gt=0, le=MAX_TOKENS)
    high: int = Field(gt=0, le=MAX_TOKENS)

    @model_validator(mode="after")
    def _check(self) -> LenRange:
        check_range(self.low, self.high, False)
        return self


class NormalLen(StrictModel):
    """A length drawn from N(mean, std), rounded, clipped to [low, high] and to at least 1."""

    dist: Literal["normal"]
    mean: float = Field(gt=0, le=MAX_TOKENS)
    std: float = Field(ge=0, le=MAX_TOKENS)
    low: int | None = Field(default=None, gt=0, le=MAX_TOKENS)
    high: int | None = Field(default=None, gt=0, le=MAX_TOKENS)

    @model_validator(mode="after")
    def _check(self) -> NormalLen:
        if self.low is not None and self.high is not None:
            check_range(self.low, self.high, False)
        return self


def _len_kind(value: Any) -> str:
    """How a length is written: an int, ``{dist: uniform, low, high}`` (``dist`` optional, the old
    ``{low, high}`` form) or ``{dist: normal, mean, std}``; for output_len also ``from_data``."""
    if isinstance(value, dict):
        return "normal" if value.get("dist") == "normal" else "uniform"
    if isinstance(value, NormalLen):
        return "normal"
    if isinstance(value, LenRange):
        return "uniform"
    return "fixed"


def _output_len_kind(value: Any) -> str:
    return "from_data" if isinstance(value, str) else _len_kind(value)


LenParam = Annotated[
    Annotated[int, Tag("fixed")] | Annotated[LenRange, Tag("uniform")] | Annotated[NormalLen, Tag("normal")],
    Discriminator(_len_kind),
]
OutputLenParam = Annotated[
    Annotated[int, Tag("fixed")]
    | Annotated[LenRange, Tag("uniform")]
    | Annotated[NormalLen, Tag("normal")]
    | Annotated[Literal["from_data"], Tag("from_data")],
    Discriminator(_output_len_kind),
]


class ClosedArrival(StrictModel):
    """Closed loop: the level's concurrency in flight at all times (a request goes as one returns)."""

    #: closed: the level's concurrency in flight at all times
    kind: Literal["closed"] = "closed"


class PoissonArrival(StrictModel):
    """Open loop: requests sent at ``rate`` per second on average, exponential gaps (seeded), never
    more than ``max_in_flight`` at once (a request due while the cap is reached waits for a slot).
    Left out, ``max_in_flight`` is the sweep level's value: the level stays the key of the results."""

    #: poisson: open loop with seeded exponential gaps
    kind: Literal["poisson"]
    #: requests a second, on average
    rate: float = Field(gt=0, le=1_000_000)
    #: the most requests in flight (a request due at the cap waits); default: the sweep level
    max_in_flight: int | None = Field(default=None, gt=0, le=MAX_CONCURRENCY)


class TraceArrival(StrictModel):
    """Open loop on the trace's own clock: request i is sent ``(t_i - t_first) / speed`` seconds after
    the window opens, ``speed`` being the level (``sweep.speeds``). Each request's lag behind its due
    time is measured; a window whose p99 lag passes ``max_lag_ms`` is stored client-bound, with why."""

    #: trace: replay the trace's arrival times (needs workload.kind trace and sweep.speeds)
    kind: Literal["trace"]
    #: the most requests in flight (a request due at the cap waits: it is late, and counted so)
    max_in_flight: int = Field(default=256, gt=0, le=MAX_CONCURRENCY)
    #: the p99 lag (ms) of sends behind the schedule above which a window is client-bound
    max_lag_ms: float = Field(default=10.0, gt=0, le=3_600_000)


def _arrival_kind(value: Any) -> str:
    if isinstance(value, dict):
        return str(value.get("kind", "closed"))
    return str(getattr(value, "kind", "closed"))


ArrivalSpec = Annotated[
    Annotated[ClosedArrival, Tag("closed")]
    | Annotated[PoissonArrival, Tag("poisson")]
    | Annotated[TraceArrival, Tag("trace")],
    Discriminator(_arrival_kind),
]

#: fields that only some workload kinds take
_KIND_FIELDS = {
    ("synthetic",): ("prompt_format",),
    ("shared_prefix",): ("num_prefixes", "prefix_len", "prefix_order"),
    ("jsonl",): ("truncate",),
    ("jsonl", "trace"): ("path",),
    ("trace",): ("trace_format", "block_size", "trace_start_s"),
}
#: tokens per ``hash_ids`` block in the Mooncake traces
MOONCAKE_BLOCK = 512


class WorkloadSpec(StrictModel):
    """What each request sends. Every kind is seeded: the same seed gives the same prompts.

    - ``synthetic``: random token ids of exactly ``input_len`` tokens.
    - ``shared_prefix``: ``num_prefixes`` system prompts of ``prefix_len`` random tokens (drawn once
      from ``seed``), each request one of them (``prefix_order``) followed by ``input_len`` random
      tokens of its own, so the prefix cache has something to find.
    - ``jsonl``: conversations from ``path`` (OpenAI ``messages`` or ShareGPT ``conversations``
      records, one JSON object a line, or one JSON array), each up to its last user turn, tokenized
      with the model's tokenizer; ``input_len`` (an int, optional) is the most prompt tokens: longer
      prompts are cut to it (``truncate: true``) or left out (``truncate: false``).
    - ``trace``: a production trace from ``path`` (``trace_format`` mooncake, azure or burstgpt; see
      ``loadgen.trace``): each request's prompt and output lengths, and (mooncake) its ``hash_ids``
      blocks of ``block_size`` tokens, a block the same tokens wherever it recurs, so the prefix cache
      sees what production saw. With ``arrival: {kind: trace}`` (the default here) the windows replay
      the trace's arrival times at each speed of ``sweep.speeds``; ``input_len`` (an int, optional)
      is the most prompt tokens (longer prompts are cut); output lengths are the trace's.

    ``endpoint: completions`` sends token ids to /v1/completions (exact input lengths);
    ``endpoint: chat`` sends text messages to /v1/chat/completions and needs a tokenizer
    (``tokenizer``, else ``model.path``, a folder with tokenizer.json).
    """

    #: synthetic (random prompts), shared_prefix (fixed prefixes before each prompt), jsonl (conversations
    #: from a file) or trace (a production trace replayed: lengths, shared prefixes, arrival times)
    kind: Literal["synthetic", "shared_prefix", "jsonl", "trace"] = "synthetic"
    #: tokens per prompt (shared_prefix: after the prefix; jsonl, trace: the most, an int or left out)
    input_len: LenParam | None = None
    #: output tokens per request (``ignore_eos``); jsonl also takes ``from_data``: the reference answer's;
    #: trace: from_data (the trace's), the only value it takes
    output_len: OutputLenParam = 64
    #: seeds every prompt (each level, window and warmup draws its own stream from it)
    seed: int = Field(default=0, ge=0, le=2**62)
    #: completions (/v1/completions) or chat (/v1/chat/completions: text messages, needs a tokenizer)
    endpoint: Literal["completions", "chat"] = "completions"
    #: how a synthetic completions prompt is sent: ``ids`` (token ids: exact lengths, no tokenizer
    #: needed) or ``text`` (random text of the same token length, tokenized by the server, as
    #: ``vllm bench serve``'s random dataset does; needs a tokenizer)
    prompt_format: Literal["ids", "text"] = "ids"
    #: a folder with tokenizer.json (or the file itself); default: model.path
    tokenizer: str | None = None
    #: how requests arrive: {kind: closed}, {kind: poisson, rate, max_in_flight} or (kind trace, its
    #: default) {kind: trace, max_in_flight, max_lag_ms}
    arrival: ArrivalSpec = Field(default_factory=ClosedArrival)
    # shared_prefix
    #: shared_prefix: how many distinct prefixes
    num_prefixes: int = Field(default=1, gt=0, le=100_000)
    #: shared_prefix: tokens per prefix (required there)
    prefix_len: int | None = Field(default=None, gt=0, le=MAX_TOKENS)
    #: shared_prefix: which prefix each request gets
    prefix_order: Literal["round_robin", "random"] = "round_robin"
    # jsonl
    #: jsonl: the file (OpenAI messages or ShareGPT conversations, one a line, or one JSON array);
    #: trace: the trace file
    path: str | None = None
    #: jsonl: cut a prompt longer than input_len to its first input_len tokens (false: leave it out)
    truncate: bool = True
    # trace
    #: trace: mooncake (JSONL: timestamp ms, input_length, output_length, hash_ids), azure (CSV:
    #: TIMESTAMP, ContextTokens, GeneratedTokens) or burstgpt (CSV: Timestamp, Request tokens,
    #: Response tokens)
    trace_format: Literal["mooncake", "azure", "burstgpt"] = "mooncake"
    #: trace: tokens per hash_ids block (512 in the Mooncake traces)
    block_size: int = Field(default=MOONCAKE_BLOCK, gt=0, le=1_000_000)
    #: trace: where each window's slice starts, seconds after the trace's first request
    trace_start_s: float = Field(default=0.0, ge=0, le=10 * 365 * 86_400)

    @model_validator(mode="before")
    @classmethod
    def _default_input_len(cls, data: Any) -> Any:
        # 128 tokens unless given; a jsonl or trace prompt has its own length (input_len is only a cap
        # there); a trace's output lengths and arrivals are its own unless said otherwise
        if not isinstance(data, dict):
            return data
        kind = data.get("kind", "synthetic")
        if kind not in ("jsonl", "trace") and "input_len" not in data:
            return {**data, "input_len": 128}
        if kind == "trace":
            return {"output_len": "from_data", "arrival": {"kind": "trace"}, **data}
        return data

    @field_validator("input_len", "output_len")
    @classmethod
    def _positive(cls, v: Any) -> Any:
        if isinstance(v, int) and not 0 < v <= MAX_TOKENS:
            raise ValueError(f"must be 1..{MAX_TOKENS} tokens (got {v})")
        return v

    @model_validator(mode="after")
    def _check(self) -> WorkloadSpec:
        for kinds, names in _KIND_FIELDS.items():
            for name in names:  # a default value is fine: a dumped spec has every field
                if self.kind not in kinds and getattr(self, name) != type(self).model_fields[name].default:
                    raise ValueError(f"{name}: only kind {' or '.join(kinds)} takes it (kind is {self.kind})")
        if self.input_len is None and self.kind not in ("jsonl", "trace"):
            raise ValueError(f"input_len: required for kind {self.kind}")
        if self.output_len == "from_data" and self.kind not in ("jsonl", "trace"):
            raise ValueError("output_len: from_data needs kind jsonl (the reference answers) or trace")
        if isinstance(self.arrival, TraceArrival) and self.kind != "trace":
            raise ValueError("arrival: kind trace replays a trace's times: it needs workload.kind trace")
        if self.kind == "trace":
            self._check_trace()
        if self.kind == "shared_prefix" and self.prefix_len is None:
            raise ValueError("prefix_len: required for kind shared_prefix (tokens per shared prefix)")
        if self.kind == "jsonl":
            if not self.path:
                raise ValueError("path: required for kind jsonl (a .jsonl file of conversations)")
            if self.input_len is not None and not isinstance(self.input_len, int):
                raise ValueError("input_len: for kind jsonl, the most prompt tokens (an int) or left out")
        return self

    def _check_trace(self) -> None:
        if not self.path:
            raise ValueError("path: required for kind trace (the trace file)")
        if self.input_len is not None and not isinstance(self.input_len, int):
            raise ValueError("input_len: for kind trace, the most prompt tokens (an int) or left out")
        if self.output_len != "from_data":
            raise ValueError("output_len: a trace gives each request's output length: from_data")
        if self.endpoint != "completions":
            raise ValueError(
                "endpoint: kind trace sends token ids to /v1/completions (exact lengths, and a shared "
                "hash_ids block the same tokens in every prompt); use endpoint completions"
            )


#: a trace replay's level key per unit of speed: speed 1.5 is level 150
SPEED_KEY = 100


def speed_key(speed: float) -> int:
    """The level key of a trace replay's speed (its percent of the trace's own rate)."""
    return round(speed * SPEED_KEY)


def level_name(key: int, speeds: bool) -> str:
    """How a level reads: ``concurrency 4``, or for a trace replay ``speed 1.5x``."""
    return f"speed {key / SPEED_KEY:g}x" if speeds else f"concurrency {key}"


class SweepSpec(StrictModel):
    #: the concurrency levels measured, in order (each a warmup, then the windows); a trace replay's
    #: levels are its speeds, keyed in percent (``speeds: [0.5, 2]`` measures levels 50 and 200)
    concurrency: list[Annotated[int, Field(gt=0, le=MAX_CONCURRENCY)]] = Field(min_length=1, max_length=100)
    #: a trace replay (workload.arrival kind trace): the speeds measured, multiples of the trace's own
    #: rate in steps of 0.01 (0.5: half its rate, 2: twice); each is the level ``round(100 x speed)``
    speeds: list[Annotated[float, Field(gt=0, le=MAX_CONCURRENCY / SPEED_KEY)]] | None = Field(
        default=None, min_length=1, max_length=100
    )
    #: requests sent at each level before the window opens, in one round: at most one per request in
    #: flight (the level's concurrency); excluded from every metric
    warmup_requests: int = Field(default=4, ge=0, le=100_000)
    #: requests measured at each level (exactly one of requests / duration_s)
    requests: int | None = Field(default=None, gt=0, le=10_000_000)
    #: seconds each measurement window sends requests (exactly one of requests / duration_s)
    duration_s: float | None = Field(default=None, gt=0, le=86_400)
    #: seconds one request may take before it counts as failed
    request_timeout_s: float = Field(default=300.0, gt=0, le=86_400)
    #: a level whose error rate exceeds this ends the trial as FAIL (reason "errors"); a window of
    #: ``requests`` is abandoned (nothing more sent, requests in flight cancelled) as soon as its
    #: failures pass this share of its requests
    max_error_rate: float = Field(default=0.05, ge=0, le=1)
    #: seconds a trial may take, from its first boot to its teardown, before it ends FAIL (reason
    #: "timeout") and its servers are stopped; null: derived from the plan (2 x (boots + every
    #: window at its worst + the reference outputs), see docs/concepts.md)
    trial_timeout_s: float | None = Field(default=None, gt=0, le=30 * 86_400)
    #: seconds between /metrics samples of the engine during the window
    metrics_interval_s: float = Field(default=0.5, ge=0.05, le=3600)
    #: CPU cores the load generator runs on while it measures (see engine.cpus): a list, or a
    #: taskset-style string such as ``8-15``. Its processes split them, one core or more each.
    client_cpus: list[Annotated[int, Field(ge=0, le=65535)]] | None = Field(default=None, min_length=1)
    #: client processes per level; None: chosen per level from client_cpus and the expected rate
    #: (one without client_cpus, at most one per core). A level whose busiest process is CPU-bound is
    #: re-run on more processes where the cores allow, else stored flagged (``client_bound``).
    client_processes: int | None = Field(default=None, ge=1, le=1024)
    #: measurement windows per level, each with its own prompts; the level's figures are the medians
    #: and every headline metric gets a confidence interval (needs >= 2; 5+ for verdicts)
    repeats: int = Field(default=1, ge=1, le=50)

    @field_validator("client_cpus", mode="before")
    @classmethod
    def _client_cpus(cls, v: Any) -> Any:
        return as_cores(v)

    @model_validator(mode="before")
    @classmethod
    def _speed_levels(cls, data: Any) -> Any:
        # a trace replay's levels are its speeds: the keys are derived from them (a dumped spec holds both)
        speeds = data.get("speeds") if isinstance(data, dict) else None
        if not isinstance(speeds, list) or not all(isinstance(s, int | float) for s in speeds):
            return data
        for s in speeds:
            if s > 0 and abs(s * SPEED_KEY - round(s * SPEED_KEY)) > 1e-6:
                raise ValueError(f"speeds: {s} is not a multiple of 0.01 (a level is keyed by its percent)")
        keys = sorted({speed_key(s) for s in speeds if s > 0})
        if len(keys) != len(speeds):
            raise ValueError(f"speeds: must be unique and > 0 (got {speeds})")
        if "concurrency" in data and sorted(data["concurrency"] or []) != keys:
            raise ValueError(
                f"concurrency: a trace replay's levels are its speeds: leave concurrency out (speeds "
                f"{speeds} are the levels {keys}), or give it as {keys}"
            )
        return {**data, "concurrency": keys}

    @field_validator("concurrency")
    @classmethod
    def _levels(cls, v: list[int]) -> list[int]:
        if any(c <= 0 for c in v):
            raise ValueError(f"every level must be > 0 (got {v})")
        if len(set(v)) != len(v):
            raise ValueError(f"levels must be unique (got {v})")
        return sorted(v)

    @model_validator(mode="after")
    def _window(self) -> SweepSpec:
        if (self.requests is None) == (self.duration_s is None):
            raise ValueError("give exactly one of requests or duration_s")
        return self
