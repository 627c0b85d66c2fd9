"""The study spec: one YAML file, merged with ``--set`` overrides, then validated once.

Precedence, lowest first: field defaults < environment (``NOVA_ENGINE_PYTHON``, ``NOVA_STORAGE``)
< the spec file < explicit flags (``--set``, ``--storage``, ``--study-name``, ``--n-trials``).

Every model forbids unknown keys, and every error names the dotted path of the field that is wrong
(``space.max_num_seqs.range.low: ...``), so a user can fix the file without reading code.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

from nova_search.engine.config import SPACE_KNOBS, Knob
from nova_search.errors import SpecError
from nova_search.metrics import METRIC_NAMES
from nova_search.objectives import Condition, make_condition, parse_condition

SPEC_METHODS = ("none", "ngram", "eagle", "eagle3", "dflash", "draft_model", "mtp", "suffix")
#: Methods that need a separate drafter checkpoint (``space.speculative.drafters[method]``).
DRAFTER_METHODS = ("eagle", "eagle3", "dflash", "draft_model")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


# ---------------------------------------------------------------- searchable parameters


class IntRange(_Model):
    low: int
    high: int
    log: bool = False
    step: int = Field(default=1, gt=0)

    @model_validator(mode="after")
    def _check(self) -> IntRange:
        _check_range(self.low, self.high, self.log)
        if self.log and self.step != 1:
            raise ValueError(f"a log-scale range takes no step (got step {self.step})")
        return self


class FloatRange(_Model):
    low: float
    high: float
    log: bool = False

    @model_validator(mode="after")
    def _check(self) -> FloatRange:
        _check_range(self.low, self.high, self.log)
        return self


def _check_range(low: float, high: float, log: bool) -> None:
    if low > high:
        raise ValueError(f"low ({low}) must be <= high ({high})")
    if log and low <= 0:
        raise ValueError(f"a log-scale range needs low > 0 (got {low})")


class IntChoices(_Model):
    choices: list[int] = Field(min_length=1)


class FloatChoices(_Model):
    choices: list[float] = Field(min_length=1)


class StrChoices(_Model):
    choices: list[str] = Field(min_length=1)


class BoolChoices(_Model):
    choices: list[bool] = Field(min_length=1)


def _param_kind(value: Any) -> str:
    """How a parameter is written: a fixed scalar, ``{choices: [...]}`` or ``{low:, high:}``."""
    if isinstance(value, dict):
        return "choices" if "choices" in value else "range"
    if isinstance(value, BaseModel):
        return "choices" if hasattr(value, "choices") else "range"
    return "fixed"


IntParam = Annotated[
    Annotated[int, Tag("fixed")] | Annotated[IntRange, Tag("range")] | Annotated[IntChoices, Tag("choices")],
    Discriminator(_param_kind),
]
FloatParam = Annotated[
    Annotated[float, Tag("fixed")]
    | Annotated[FloatRange, Tag("range")]
    | Annotated[FloatChoices, Tag("choices")],
    Discriminator(_param_kind),
]
StrParam = Annotated[
    Annotated[str, Tag("fixed")] | Annotated[StrChoices, Tag("choices")], Discriminator(_param_kind)
]
BoolParam = Annotated[
    Annotated[bool, Tag("fixed")] | Annotated[BoolChoices, Tag("choices")], Discriminator(_param_kind)
]


class SpeculativeSpace(_Model):
    """The drafter search. ``num_speculative_tokens`` is sampled only when the method is not none."""

    method: StrParam = "none"
    num_speculative_tokens: IntParam | None = None
    prompt_lookup_min: IntParam | None = None
    prompt_lookup_max: IntParam | None = None
    #: drafter checkpoint (path or hub id) per method that needs one
    drafters: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> SpeculativeSpace:
        methods = self.methods()
        for m in methods:
            if m not in SPEC_METHODS:
                raise ValueError(f"method {m!r} is not one of {', '.join(SPEC_METHODS)}")
        for m in self.drafters:
            if m not in DRAFTER_METHODS:
                raise ValueError(f"drafters.{m}: only {', '.join(DRAFTER_METHODS)} take a drafter model")
        for m in methods:
            if m in DRAFTER_METHODS and m not in self.drafters:
                raise ValueError(
                    f"drafters.{m} is required because method includes {m!r} (a drafter model path or hub id)"
                )
        if any(m != "none" for m in methods) and self.num_speculative_tokens is None:
            raise ValueError("num_speculative_tokens is required when a method other than none is listed")
        return self

    def methods(self) -> list[str]:
        return list(self.method.choices) if isinstance(self.method, StrChoices) else [self.method]


#: how a spec writes a knob of each type: fixed, {choices: [...]}, or (numbers) {low:, high:}
_PARAM_OF: dict[type, Any] = {int: IntParam, float: FloatParam, str: StrParam, bool: BoolParam}


def _knob_field(k: Knob, annotation: Any) -> tuple[Any, Any]:
    return (annotation | None, Field(default=None, description=k.help))


#: One joint search space. A knob left out is not passed to vLLM (its default, or engine.defaults).
#: Its fields are the knob table's (``engine.config.KNOBS``), each searched or fixed, plus the drafter.
SpaceSpec = create_model(  # type: ignore[call-overload]
    "SpaceSpec",
    __base__=_Model,
    __doc__="One joint search space: the knob table's knobs (fixed, choices or a range) and the drafter.",
    **{name: _knob_field(k, _PARAM_OF[k.type]) for name, k in SPACE_KNOBS.items()},
    speculative=(SpeculativeSpace, Field(default_factory=SpeculativeSpace)),
)


# ---------------------------------------------------------------- model, engine


class ModelSpec(_Model):
    #: a local model folder or a hub id; relative paths are resolved against the working directory
    path: str
    #: the name the server answers to (``--served-model-name``); defaults to ``path``
    served_name: str | None = None
    #: vocabulary size for synthetic token prompts; read from ``path/config.json`` when left out
    vocab_size: int | None = Field(default=None, gt=10)


def _fixed_field(k: Knob) -> tuple[Any, Any]:
    bounds = {b: getattr(k, b) for b in ("gt", "ge", "le") if getattr(k, b) is not None}
    if k.type is int:
        bounds = {b: int(v) for b, v in bounds.items()}
    return (k.type | None, Field(default=None, description=k.help, **bounds))


#: Knobs the machine needs even for the stock baseline (for example host-memory share on a CPU), and
#: the shape of a ``tuned`` configuration: the knob table's knobs, fixed values only.
EngineDefaults = create_model(  # type: ignore[call-overload]
    "EngineDefaults",
    __base__=_Model,
    __doc__="Fixed knob values (the knob table's knobs): engine.defaults and tuned.",
    **{name: _fixed_field(k) for name, k in SPACE_KNOBS.items()},
)


#: engine.env names whose values must not be written into a spec (it is stored with the study)
SECRET_NAME = re.compile(
    r"TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_KEY|PRIVATE_KEY|CREDENTIAL", re.IGNORECASE
)


class EngineSpec(_Model):
    #: an interpreter that has vLLM; runs ``python -m vllm.entrypoints.openai.api_server``.
    #: ``NOVA_ENGINE_PYTHON`` overrides it.
    python: str | None = None
    #: an argv prefix for images that ship the CLI, e.g. ``[vllm, serve]`` (the model is appended)
    command: list[str] | None = None
    #: ``cuda`` or ``cpu`` (vLLM's CPU build: device memory is host memory)
    device: Literal["cuda", "cpu"] = "cuda"
    #: the address servers bind to: loopback unless a node must be reached from elsewhere
    host: str = "127.0.0.1"
    #: GPUs one server shards the model over (a worker runs one trial per group of this many GPUs)
    tensor_parallel_size: int = Field(default=1, ge=1, le=64)
    #: extra environment for every server; ``${NAME}`` / ``${NAME:-default}`` is read from the worker's
    #: environment at launch (secrets go that way: the spec is stored with the study). The server
    #: inherits nothing else of the worker's environment but PATH, locale, CUDA/NCCL/HF/VLLM/TORCH/...
    env: dict[str, str] = Field(default_factory=dict)
    #: flags passed to every trial's server, after the knobs
    extra_args: list[str] = Field(default_factory=list)
    #: CPU cores the server is pinned to (its children inherit it). On a small CPU machine keep the
    #: engine and the load generator (sweep.client_cpus) on different cores, or both measure noise.
    cpus: list[int] | None = Field(default=None, min_length=1)
    defaults: EngineDefaults = Field(default_factory=EngineDefaults)
    boot_timeout_s: float = Field(default=900.0, gt=0)
    stop_timeout_s: float = Field(default=20.0, gt=0)

    @model_validator(mode="after")
    def _check(self) -> EngineSpec:
        if self.python is not None and self.command is not None:
            raise ValueError("give engine.python or engine.command, not both")
        if self.command is not None and not self.command:
            raise ValueError("engine.command must not be empty")
        for flag in ("--api-key", "--port", "--host"):
            if any(a == flag or a.startswith(flag + "=") for a in self.extra_args):
                raise ValueError(f"extra_args must not set {flag}: nova-search sets it per trial")
        if "VLLM_API_KEY" in self.env:
            raise ValueError("env.VLLM_API_KEY: nova-search sets a fresh API key per trial")
        for key, value in self.env.items():
            if SECRET_NAME.search(key) and not re.fullmatch(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}", value):
                raise ValueError(
                    f"env.{key} looks like a secret, and the spec is stored with the study (dump, "
                    f"dashboard): write it as '${{{key}}}' and set {key} in each worker's environment"
                )
        return self

    def resolved_python(self) -> str | None:
        """``NOVA_ENGINE_PYTHON`` wins over the spec, so one spec runs on any machine."""
        if self.command is not None:
            return None
        return os.environ.get("NOVA_ENGINE_PYTHON") or self.python


# ---------------------------------------------------------------- workload, sweep


class LenRange(_Model):
    """A length drawn uniformly from [low, high] (both inclusive). ``dist`` may be left out."""

    dist: Literal["uniform"] = "uniform"
    low: int = Field(gt=0)
    high: int = Field(gt=0)

    @model_validator(mode="after")
    def _check(self) -> LenRange:
        _check_range(self.low, self.high, False)
        return self


class NormalLen(_Model):
    """A length drawn from N(mean, std), rounded, clipped to [low, high] and to at least 1."""

    dist: Literal["normal"]
    mean: float = Field(gt=0)
    std: float = Field(ge=0)
    low: int | None = Field(default=None, gt=0)
    high: int | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _check(self) -> NormalLen:
        if self.low is not None and self.high is not None:
            _check_range(self.low, self.high, False)
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


class ClosedArrival(_Model):
    """Closed loop: the level's concurrency in flight at all times (a request goes as one returns)."""

    kind: Literal["closed"] = "closed"


class PoissonArrival(_Model):
    """Open loop: requests sent at ``rate`` per second on average, exponential gaps (seeded), never
    more than ``max_in_flight`` at once (a request due while the cap is reached waits for a slot).
    Left out, ``max_in_flight`` is the sweep level's value: the level stays the key of the results."""

    kind: Literal["poisson"]
    rate: float = Field(gt=0)
    max_in_flight: int | None = Field(default=None, gt=0)


def _arrival_kind(value: Any) -> str:
    if isinstance(value, dict):
        return str(value.get("kind", "closed"))
    return str(getattr(value, "kind", "closed"))


ArrivalSpec = Annotated[
    Annotated[ClosedArrival, Tag("closed")] | Annotated[PoissonArrival, Tag("poisson")],
    Discriminator(_arrival_kind),
]

#: fields that only one workload kind takes
_KIND_FIELDS = {
    "synthetic": ("prompt_format",),
    "shared_prefix": ("num_prefixes", "prefix_len", "prefix_order"),
    "jsonl": ("path", "truncate"),
}


class WorkloadSpec(_Model):
    """What each request sends. Every kind is seeded: the same seed gives the same prompts.

    - ``synthetic``: random token ids of exactly ``input_len`` tokens.
    - ``shared_prefix``: ``num_prefixes`` system prompts of ``prefix_len`` random tokens (drawn once
      from ``seed``), each request one of them (``prefix_order``) followed by ``input_len`` random
      tokens of its own, so the prefix cache has something to find.
    - ``jsonl``: conversations from ``path`` (OpenAI ``messages`` or ShareGPT ``conversations``
      records, one JSON object a line, or one JSON array), each up to its last user turn, tokenized
      with the model's tokenizer; ``input_len`` (an int, optional) is the most prompt tokens: longer
      prompts are cut to it (``truncate: true``) or left out (``truncate: false``).

    ``endpoint: completions`` sends token ids to /v1/completions (exact input lengths);
    ``endpoint: chat`` sends text messages to /v1/chat/completions and needs a tokenizer
    (``tokenizer``, else ``model.path``, a folder with tokenizer.json).
    """

    kind: Literal["synthetic", "shared_prefix", "jsonl"] = "synthetic"
    #: tokens per prompt (shared_prefix: after the prefix; jsonl: the most, an int or left out)
    input_len: LenParam | None = None
    #: output tokens per request (``ignore_eos``); jsonl also takes ``from_data``: the reference answer's
    output_len: OutputLenParam = 64
    seed: int = 0
    endpoint: Literal["completions", "chat"] = "completions"
    #: how a synthetic completions prompt is sent: ``ids`` (token ids: exact lengths, no tokenizer
    #: needed) or ``text`` (random text of the same token length, tokenized by the server, as
    #: ``vllm bench serve``'s random dataset does; needs a tokenizer)
    prompt_format: Literal["ids", "text"] = "ids"
    #: a folder with tokenizer.json (or the file itself); default: model.path
    tokenizer: str | None = None
    arrival: ArrivalSpec = Field(default_factory=ClosedArrival)
    # shared_prefix
    num_prefixes: int = Field(default=1, gt=0)
    prefix_len: int | None = Field(default=None, gt=0)
    prefix_order: Literal["round_robin", "random"] = "round_robin"
    # jsonl
    path: str | None = None
    truncate: bool = True

    @model_validator(mode="before")
    @classmethod
    def _default_input_len(cls, data: Any) -> Any:
        # 128 tokens unless given; a jsonl prompt has its own length (input_len is only a cap there)
        if isinstance(data, dict) and data.get("kind", "synthetic") != "jsonl" and "input_len" not in data:
            return {**data, "input_len": 128}
        return data

    @field_validator("input_len", "output_len")
    @classmethod
    def _positive(cls, v: Any) -> Any:
        if isinstance(v, int) and v <= 0:
            raise ValueError(f"must be > 0 (got {v})")
        return v

    @model_validator(mode="after")
    def _check(self) -> WorkloadSpec:
        for kind, names in _KIND_FIELDS.items():
            for name in names:  # a default value is fine: a dumped spec has every field
                if self.kind != kind and getattr(self, name) != type(self).model_fields[name].default:
                    raise ValueError(f"{name}: only kind {kind} takes it (kind is {self.kind})")
        if self.input_len is None and self.kind != "jsonl":
            raise ValueError(f"input_len: required for kind {self.kind}")
        if self.output_len == "from_data" and self.kind != "jsonl":
            raise ValueError("output_len: from_data needs kind jsonl (the reference answers)")
        if self.kind == "shared_prefix" and self.prefix_len is None:
            raise ValueError("prefix_len: required for kind shared_prefix (tokens per shared prefix)")
        if self.kind == "jsonl":
            if not self.path:
                raise ValueError("path: required for kind jsonl (a .jsonl file of conversations)")
            if self.input_len is not None and not isinstance(self.input_len, int):
                raise ValueError("input_len: for kind jsonl, the most prompt tokens (an int) or left out")
        return self


def parse_cores(text: str) -> list[int]:
    """A core list as ``taskset -c`` writes it: numbers and ranges separated by commas (``8-15``,
    ``0,2,4-7``, ``0-15:2`` for every second core). Sorted, without repeats; ValueError on anything
    else (an empty list included)."""
    cores: set[int] = set()
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        m = re.fullmatch(r"(\d+)(?:-(\d+)(?::(\d+))?)?", part)
        if m is None:
            raise ValueError(f"{part!r} is not a core, nor a range of cores like 8-15")
        low = int(m.group(1))
        high = int(m.group(2)) if m.group(2) is not None else low
        step = int(m.group(3)) if m.group(3) is not None else 1
        if high < low or step < 1:
            raise ValueError(f"{part!r}: a range goes from low to high, with a positive step")
        cores.update(range(low, high + 1, step))
    if not cores:
        raise ValueError(f"{text!r} names no core")
    return sorted(cores)


def _cores(value: Any) -> Any:
    """``client_cpus`` as YAML gives it: ``8-15``, ``"0,2,4-7"``, ``[8, 9]`` or ``["8-11", 14]``."""
    if isinstance(value, int) and not isinstance(value, bool):
        return [value]
    if isinstance(value, str):
        return parse_cores(value)
    if isinstance(value, list) and any(isinstance(v, str) for v in value):
        return parse_cores(",".join(str(v) for v in value))
    return value


class SweepSpec(_Model):
    concurrency: list[int] = Field(min_length=1)
    #: requests sent at each level before the window opens; excluded from every metric
    warmup_requests: int = Field(default=4, ge=0)
    #: requests measured at each level (exactly one of requests / duration_s)
    requests: int | None = Field(default=None, gt=0)
    duration_s: float | None = Field(default=None, gt=0)
    request_timeout_s: float = Field(default=300.0, gt=0)
    #: a level whose error rate exceeds this ends the trial as FAIL (reason "errors")
    max_error_rate: float = Field(default=0.05, ge=0, le=1)
    #: seconds between /metrics samples of the engine during the window
    metrics_interval_s: float = Field(default=0.5, gt=0)
    #: CPU cores the load generator runs on while it measures (see engine.cpus): a list, or a
    #: taskset-style string such as ``8-15``. Its processes split them, one core or more each.
    client_cpus: list[int] | None = Field(default=None, min_length=1)
    #: client processes per level; None: chosen per level from client_cpus and the expected rate
    #: (one without client_cpus, at most one per core). A level whose busiest process is CPU-bound is
    #: re-run on more processes where the cores allow, else stored flagged (``client_bound``).
    client_processes: int | None = Field(default=None, ge=1)
    #: measurement windows per level, each with its own prompts; the level's figures are the medians
    #: and every headline metric gets a confidence interval (needs >= 2; 5+ for verdicts)
    repeats: int = Field(default=1, ge=1, le=50)

    @field_validator("client_cpus", mode="before")
    @classmethod
    def _client_cpus(cls, v: Any) -> Any:
        return _cores(v)

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


# ---------------------------------------------------------------- objectives, constraints

At = int | Literal["best"]


class ObjectiveSpec(_Model):
    metric: str
    direction: Literal["maximize", "minimize"]
    #: a concurrency level of the sweep, or "best": the best value over all levels
    at: At = "best"

    @field_validator("metric")
    @classmethod
    def _metric(cls, v: str) -> str:
        return _known_metric(v)

    @property
    def name(self) -> str:
        return f"{self.metric}@{self.at}"


class ConstraintSpec(_Model):
    """An SLO: ``ttft_p99_ms <= 500 at concurrency 4`` (or ``@4``), or the same as a mapping.

    The grammar is ``objectives.Condition``'s, the one ``best --where`` reads too: OP ``<=``, ``>=``,
    ``<`` or ``>``; the level a concurrency of the sweep, ``every`` (the default: the worst level
    counts) or ``best``. Stored with ``trial.set_constraint``; Optuna treats a value <= 0 as feasible.
    """

    metric: str
    op: Literal["<=", ">=", "<", ">"]
    value: float
    at: int | Literal["every", "best"] = "every"

    @model_validator(mode="before")
    @classmethod
    def _parse(cls, data: Any) -> Any:
        try:
            if isinstance(data, str):
                c = parse_condition(data)
            elif isinstance(data, dict) and {"metric", "op", "value"} <= set(data):
                c = make_condition(
                    data["metric"], data["op"], data["value"], data.get("at", "every"), "constraint"
                )
            else:
                return data
        except SpecError as e:
            raise ValueError(str(e)) from None
        return {"metric": c.metric, "op": c.op, "value": c.value, "at": c.at}

    @property
    def condition(self) -> Condition:
        return Condition(self.metric, self.op, self.value, self.at)

    @property
    def name(self) -> str:
        return self.condition.name


def _known_metric(v: str) -> str:
    if v not in METRIC_NAMES:
        raise ValueError(f"unknown metric {v!r}; valid: {', '.join(METRIC_NAMES)}")
    return v


class SLOSpec(_Model):
    """Per-request latency limits (ms) that goodput counts: a request is good when it meets all."""

    ttft_ms: float | None = Field(default=None, gt=0)
    tpot_ms: float | None = Field(default=None, gt=0)
    e2e_ms: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _some(self) -> SLOSpec:
        if self.ttft_ms is None and self.tpot_ms is None and self.e2e_ms is None:
            raise ValueError("give at least one of ttft_ms, tpot_ms, e2e_ms")
        return self


class BudgetSpec(_Model):
    #: trials counted across every worker (complete, pruned and failed alike); with stages, per stage
    n_trials: int = Field(default=10, gt=0)
    #: a budget per stage (``{tune: 20, speculative: 12}``); a stage left out gets ``n_trials``
    per_stage: dict[Literal["tune", "speculative"], Annotated[int, Field(gt=0)]] = Field(default_factory=dict)

    def for_stage(self, stage: str) -> int:
        return self.per_stage.get(stage, self.n_trials)  # type: ignore[call-overload]


#: how the search is staged: one joint study, or tune the non-speculative stack first and then search
#: drafting on top of the best tuned configuration (each stage its own Optuna study)
STAGINGS: tuple[tuple[str, ...], ...] = (("joint",), ("tune",), ("tune", "speculative"), ("speculative",))


class SamplerSpec(_Model):
    name: Literal["tpe", "gp", "nsga2", "random", "grid"] = "tpe"
    seed: int | None = 0


#: a study name is an Optuna study name and a folder of the artifacts: letters, digits, ``_ . -``, not
#: starting with ``.`` or ``-``, no ``..``, at most 128 characters
STUDY_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"


def study_name_problem(name: object) -> str | None:
    if not isinstance(name, str) or not re.fullmatch(STUDY_NAME_PATTERN, name) or ".." in name:
        return (
            f"{name!r} is not a safe study name: use 1-128 letters, digits, '_', '.' or '-', starting "
            "with a letter or digit, without '..' (it names a folder of the artifacts)"
        )
    return None


def check_study_name(name: str, what: str = "name") -> str:
    """``name`` when it is a safe study name; SpecError naming ``what`` otherwise."""
    problem = study_name_problem(name)
    if problem:
        raise SpecError(f"{what}: {problem}")
    return name


class StudySpec(_Model):
    name: str

    @field_validator("name")
    @classmethod
    def _safe_name(cls, v: str) -> str:
        problem = study_name_problem(v)
        if problem:
            raise ValueError(problem)
        return v

    model: ModelSpec
    engine: EngineSpec = Field(default_factory=EngineSpec)
    space: SpaceSpec = Field(default_factory=SpaceSpec)
    workload: WorkloadSpec = Field(default_factory=WorkloadSpec)
    sweep: SweepSpec
    objectives: list[ObjectiveSpec] = Field(min_length=1)
    constraints: list[ConstraintSpec] = Field(default_factory=list)
    #: per-request SLO for goodput (leave out: every successful request counts as good)
    slo: SLOSpec | None = None
    #: baseline trials enqueued first; "stock" runs the model on engine.defaults alone
    baselines: list[Literal["stock"]] = Field(default_factory=lambda: ["stock"])
    #: [joint] (one study), [tune], [tune, speculative], or [speculative] on a given ``tuned``
    stages: list[Literal["joint", "tune", "speculative"]] = Field(default_factory=lambda: ["joint"])
    #: a configuration already tuned (a team's production launch, say), on top of engine.defaults.
    #: The tune stage measures it first as a "reference" trial; with ``stages: [speculative]`` the
    #: drafter search builds on it directly
    tuned: EngineDefaults | None = None
    budget: BudgetSpec = Field(default_factory=BudgetSpec)
    sampler: SamplerSpec = Field(default_factory=SamplerSpec)
    storage: str | None = None
    #: where trial logs go; one folder per study and trial
    artifacts_dir: str = "nova-artifacts"

    @model_validator(mode="after")
    def _stages(self) -> StudySpec:
        if tuple(self.stages) not in STAGINGS:
            valid = " or ".join("(" + ", ".join(st) + ")" for st in STAGINGS)
            given = ", ".join(self.stages)
            raise ValueError(f"stages: ({given}) is not a staging nova-search runs; use {valid}")
        if self.stages == ["speculative"] and self.tuned is None:
            raise ValueError(
                "stages: (speculative) alone builds on a tuned configuration: give `tuned` "
                "(the knobs of your tuned launch) or use stages (tune, speculative)"
            )
        if "speculative" in self.stages and not any(m != "none" for m in self.space.speculative.methods()):
            raise ValueError(
                "stages: the speculative stage needs space.speculative.method to list a drafter "
                "(ngram, eagle, eagle3, dflash, draft_model, mtp or suffix)"
            )
        extra = sorted(set(self.budget.per_stage) - set(self.stages))
        if extra:
            names = ", ".join(extra)
            raise ValueError(f"budget.per_stage: {names} is not a stage of this spec ({self.stages})")
        return self

    @property
    def staged(self) -> bool:
        return self.stages != ["joint"]

    @model_validator(mode="after")
    def _levels_exist(self) -> StudySpec:
        levels = set(self.sweep.concurrency)
        for i, o in enumerate(self.objectives):
            if o.at != "best" and o.at not in levels:
                raise ValueError(
                    f"objectives.{i}.at: {o.at} is not a level of sweep.concurrency {sorted(levels)}"
                )
        for i, c in enumerate(self.constraints):
            if isinstance(c.at, int) and c.at not in levels:
                raise ValueError(
                    f"constraints.{i}.at: {c.at} is not a level of sweep.concurrency {sorted(levels)}"
                )
        names = [o.name for o in self.objectives]
        if len(set(names)) != len(names):
            raise ValueError(f"objectives repeat: {names}")
        return self


# ---------------------------------------------------------------- loading


def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``dotted.key=value`` overrides to a raw spec mapping. Values are read as YAML."""
    out = _deepcopy(raw)
    for item in overrides:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise SpecError(f"--set {item!r}: write it as dotted.key=value, e.g. sweep.concurrency=[1,8]")
        try:
            value = yaml.safe_load(text) if text.strip() else ""
        except yaml.YAMLError as e:
            raise SpecError(f"--set {key}: the value is not valid YAML ({e})") from None
        node: Any = out
        parts = key.strip().split(".")
        for depth, part in enumerate(parts[:-1]):
            nxt = node.get(part) if isinstance(node, dict) else None
            if nxt is None:
                nxt = {}
                node[part] = nxt
            elif not isinstance(nxt, dict):
                where = ".".join(parts[: depth + 1])
                raise SpecError(f"--set {key}: {where} is not a mapping")
            node = nxt
        node[parts[-1]] = value
    return out


def _deepcopy(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _deepcopy(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_deepcopy(x) for x in v]
    return v


def redacted_spec(spec: StudySpec) -> dict[str, Any]:
    """The spec as a study stores it: every field, with the storage URL's password masked (workers
    take the storage URL from ``--storage`` / NOVA_STORAGE, never from a stored spec)."""
    from nova_search.db import mask

    raw = spec.model_dump(mode="json")
    if raw.get("storage"):
        raw["storage"] = mask(raw["storage"])
    return raw


def parse_spec(raw: Any, source: str = "spec") -> StudySpec:
    """Validate a raw mapping; every problem is reported with its field path."""
    if not isinstance(raw, dict):
        raise SpecError(f"{source}: the top level must be a mapping of fields")
    try:
        return StudySpec.model_validate(raw)
    except ValidationError as e:
        raise SpecError(format_validation_error(e, source)) from None


def load_spec(path: str | Path, overrides: list[str] | None = None) -> StudySpec:
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise SpecError(f"cannot read spec {p}: {e.strerror}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise SpecError(f"{p}: not valid YAML: {e}") from None
    if not isinstance(raw, dict):
        raise SpecError(f"{p}: the top level must be a mapping of fields")
    return parse_spec(apply_overrides(raw, overrides or []), str(p))


def format_validation_error(e: ValidationError, source: str) -> str:
    lines = [f"{source}: {e.error_count()} invalid field(s)"]
    for err in e.errors(include_url=False):
        loc = ".".join(str(x) for x in err["loc"]) or "(top level)"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown field (check the spelling; see the README's spec reference)"
        given = err.get("input")
        shown = (
            ""
            if err["type"] in ("missing", "extra_forbidden") or isinstance(given, dict)
            else (f" (got {given!r})")
        )
        lines.append(f"  {loc}: {msg}{shown}")
    return "\n".join(lines)
