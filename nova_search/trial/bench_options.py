"""``nova-search bench``'s options, validated once: ``BenchOptions`` (a pydantic model) holds every
option as the command line gives it and checks it, and ``plan()`` turns it into the ``BenchPlan``
that ``trial.bench.run_bench`` measures.

Its bounds are the ones a spec has (``spec.workload`` and ``spec.sweep``): a level of a hundred
million requests in flight would open as many connections and run out of memory. ``bench_options``
builds it and turns the first problem found into a SpecError that names the option (``--warmup
100000000: at most 100000``): the fields in the order the model lists them (levels, counts, lengths,
cores, processes, words), then the rules across them (exactly one of ``--num-requests`` and
``--duration``; ``--prompt-format text`` needs ``--tokenizer``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from nova_search.errors import SpecError
from nova_search.search.cores import cores_here
from nova_search.spec import WorkloadSpec, parse_cores
from nova_search.spec.workload import MAX_CONCURRENCY, MAX_TOKENS
from nova_search.trial.bench import BenchPlan

#: at most this many levels in one run
MAX_LEVELS = 100
#: what ``--usage`` says -> ``BenchPlan.per_chunk_usage``
USAGE = {"auto": None, "per-chunk": True, "final": False}
#: fields whose option is not ``--`` + the field's name with dashes
_FLAGS = {"out_format": "--format"}
#: the fields that take one of a few words, and those words
_CHOICES: dict[str, tuple[str, ...]] = {
    "usage": tuple(USAGE),
    "json_names": ("nova", "vllm"),
    "out_format": ("table", "json"),
    "prompt_format": ("ids", "text"),
}


def _flag(field: str) -> str:
    return _FLAGS.get(field, "--" + field.replace("_", "-"))


class BenchOptions(BaseModel):
    """bench's options (problems are reported in this order); ``cpus`` and ``processes`` as typed
    (``8-15``, ``auto``) or as values."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    url: str
    concurrency: tuple[int, ...] = Field(min_length=1)
    num_requests: int | None = Field(default=None, ge=1, le=10_000_000)
    duration: float | None = Field(default=None, ge=0.1, le=86_400)
    warmup: int = Field(default=4, ge=0, le=100_000)
    input_len: int = Field(default=128, ge=1, le=MAX_TOKENS)
    output_len: int = Field(default=64, ge=1, le=MAX_TOKENS)
    vocab_size: int = Field(default=1000, ge=11)
    cpus: tuple[int, ...] | None = None
    processes: int | None = None
    usage: Literal["auto", "per-chunk", "final"] = "auto"
    json_names: Literal["nova", "vllm"] = "nova"
    out_format: Literal["table", "json"] = "table"
    prompt_format: Literal["ids", "text"] = "ids"
    tokenizer: str | None = None
    api_key: str | None = None
    model: str | None = None
    seed: int = 0
    preconnect: bool = True
    requests_out: Path | None = None

    @field_validator("concurrency", mode="before")
    @classmethod
    def _levels(cls, value: Any) -> Any:
        levels = tuple(value)
        if any(not isinstance(v, int) or v < 1 for v in levels):
            raise ValueError(f"--concurrency {levels}: give positive integers")
        if len(levels) > MAX_LEVELS:
            raise ValueError(f"--concurrency: {len(levels)} levels; at most {MAX_LEVELS}")
        for level in levels:
            if level > MAX_CONCURRENCY:
                raise ValueError(
                    f"--concurrency {level}: at most {MAX_CONCURRENCY} requests in flight "
                    "(sweep.concurrency's bound)"
                )
        return levels

    @field_validator("cpus", mode="before")
    @classmethod
    def _cpus(cls, value: Any) -> Any:
        if isinstance(value, str):
            try:
                value = tuple(parse_cores(value)) if value else ()
            except ValueError as e:
                raise ValueError(f"--cpus {value!r}: {e}; e.g. 1 or 8-15 or 0,2,4-7") from None
        if value:
            try:
                cores_here("--cpus", value)
            except SpecError as e:  # a problem of this field, in its place among the others
                raise ValueError(str(e)) from None
        return value or None

    @field_validator("processes", mode="before")
    @classmethod
    def _processes(cls, value: Any) -> Any:
        if value in ("auto", None):
            return None
        try:
            n = int(value)
        except ValueError:
            n = 0
        if not 1 <= n <= 1024:
            raise ValueError(f"--processes {value!r}: give an integer from 1 to 1024, or auto")
        return n

    @field_validator(*_CHOICES, mode="before")
    @classmethod
    def _choice(cls, value: Any, info: ValidationInfo) -> Any:
        valid = _CHOICES[info.field_name]
        if value not in valid:
            raise ValueError(f"{_flag(info.field_name)} {value!r}: valid values are {', '.join(valid)}")
        return value

    @model_validator(mode="after")
    def _across(self) -> BenchOptions:
        if (self.num_requests is None) == (self.duration is None):
            raise ValueError("give exactly one of --num-requests or --duration")
        if self.prompt_format == "text" and not self.tokenizer:
            raise ValueError("--prompt-format text: give --tokenizer (a folder with tokenizer.json)")
        return self

    def plan(self) -> BenchPlan:
        """The plan ``run_bench`` measures."""
        return BenchPlan(
            url=self.url,
            concurrency=self.concurrency,
            cpus=self.cpus,
            processes=self.processes,
            per_chunk_usage=USAGE[self.usage],
            preconnect=self.preconnect,
            requests_out=self.requests_out,
            api_key=self.api_key,
            model=self.model,
            num_requests=self.num_requests,
            duration_s=self.duration,
            warmup_requests=self.warmup,
            vocab_size=self.vocab_size,
            workload=WorkloadSpec(
                input_len=self.input_len,
                output_len=self.output_len,
                seed=self.seed,
                prompt_format=self.prompt_format,
                tokenizer=self.tokenizer,
            ),
        )


def bench_options(**options: Any) -> BenchOptions:
    """The options, validated; SpecError with the first problem, naming its option."""
    try:
        return BenchOptions(**options)
    except ValidationError as e:
        raise SpecError(_first_problem(e)) from None


def _first_problem(e: ValidationError) -> str:
    err = e.errors(include_url=False)[0]
    field = str(err["loc"][0]) if err["loc"] else ""
    bound = err.get("ctx") or {}
    if err["type"] in ("less_than_equal", "greater_than_equal"):
        limit = bound["le"] if err["type"] == "less_than_equal" else bound["ge"]
        if isinstance(limit, float) and limit.is_integer():
            limit = int(limit)  # a float field's bound as it was written: 86400, not 86400.0
        side = "at most" if err["type"] == "less_than_equal" else "at least"
        return f"{_flag(field)} {err['input']}: {side} {limit}"
    msg = str(err["msg"]).removeprefix("Value error, ")
    return msg if msg.startswith(("--", "give ")) or not field else f"{_flag(field)}: {msg}"
