"""The study: objectives, constraints, SLOs, budget, sampler, stages, and the spec as a whole."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from nova_search import redact
from nova_search.errors import SpecError
from nova_search.measure.objectives import (
    KNOWN_METRICS,
    Condition,
    is_figure,
    make_condition,
    parse_condition,
)
from nova_search.spec._base import MAX_CORE, SPEC_METHODS, StrictModel
from nova_search.spec.acceptance import device_problem
from nova_search.spec.model_engine import EngineDefaults, EngineSpec, ModelSpec
from nova_search.spec.service_level import CapacitySpec, SLOSpec
from nova_search.spec.space import SpaceSpec
from nova_search.spec.workload import SweepSpec, TraceArrival, WorkloadSpec, level_name

# ---------------------------------------------------------------- objectives, constraints

At = int | Literal["best"]


class ObjectiveSpec(StrictModel):
    #: a LevelResult metric (output_throughput, ttft_p99_ms, goodput, ...) or a trial figure of the
    #: capacity search (capacity_per_gpu, capacity, cost_per_mtok, joules_per_token): see Metric definitions
    metric: str
    #: maximize or minimize
    direction: Literal["maximize", "minimize"]
    #: a concurrency level of the sweep, or "best": the best value over all levels (a trial figure: best)
    at: At = "best"

    @field_validator("metric")
    @classmethod
    def _metric(cls, v: str) -> str:
        return _known_metric(v)

    @model_validator(mode="after")
    def _figure_level(self) -> ObjectiveSpec:
        if is_figure(self.metric) and self.at != "best":
            raise ValueError(
                f"at: {self.metric} is one figure per trial (at the SLO, from the capacity search), not per "
                "level: leave `at` out"
            )
        return self

    @property
    def name(self) -> str:
        return f"{self.metric}@{self.at}"


class ConstraintSpec(StrictModel):
    """An SLO: ``ttft_p99_ms <= 500 at concurrency 4`` (or ``@4``), or the same as a mapping.

    The grammar is ``objectives.Condition``'s, the one ``best --where`` reads too: OP ``<=``, ``>=``,
    ``<`` or ``>``; the level a concurrency of the sweep, ``every`` (the default: the worst level
    counts) or ``best``. Stored with ``trial.set_constraint``; Optuna treats a value <= 0 as feasible.
    """

    #: a LevelResult metric, as in objectives
    metric: str
    #: <=, >=, < or >
    op: Literal["<=", ">=", "<", ">"]
    #: the bound, in the metric's unit
    value: float
    #: a concurrency level, every (the worst level counts) or best
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
    if v not in KNOWN_METRICS:
        raise ValueError(f"unknown metric {v!r}; valid: {', '.join(KNOWN_METRICS)}")
    return v


class BudgetSpec(StrictModel):
    #: trials counted across every worker (complete, pruned and failed alike); with stages, per stage
    n_trials: int = Field(default=10, gt=0, le=100_000)
    #: a budget per stage (``{tune: 20, speculative: 12}``); a stage left out gets ``n_trials``
    per_stage: dict[Literal["tune", "speculative"], Annotated[int, Field(gt=0, le=100_000)]] = Field(
        default_factory=dict
    )

    def for_stage(self, stage: str) -> int:
        return self.per_stage.get(stage, self.n_trials)  # type: ignore[call-overload]


class EarlyStopSpec(StrictModel):
    """Stop a trial after a level of its sweep (PRUNED, with the level and the reason) when a
    constraint is already broken, or when a finished feasible trial beat it at every level so far on
    every objective by more than ``margin`` (nova_search/analysis/dominance.py)."""

    #: the relative lead a finished trial must hold at every level, on every objective, to stop this one:
    #: set it above the spread of repeated windows of one server
    margin: float = Field(default=0.05, gt=0.0, le=1.0)
    #: levels measured before a trial can be judged dominated (a broken constraint stops it at once)
    min_levels: int = Field(default=1, ge=1, le=1000)


class ConfirmSpec(StrictModel):
    """Measure again the trials that come out on or near the front: ABBA windows against the current
    leader, kept resident between trials (asleep in vLLM's sleep mode on a GPU), until the two
    intervals separate or the cap is reached (nova_search/trial/confirm.py)."""

    #: a finished feasible trial is confirmed unless another beat it on every objective, at every level,
    #: by more than this (relative); in the speculative stage every feasible candidate is confirmed
    near: float = Field(default=0.05, gt=0.0, le=1.0)
    #: pairs of windows (one of the leader, one of the trial) measured before the intervals are judged:
    #: a difference can be verified from 3 on (analysis.noise.MIN_SAMPLES)
    min_pairs: int = Field(default=3, ge=1, le=25)
    #: the cap: pairs per level, whatever the intervals say
    max_pairs: int = Field(default=5, ge=1, le=25)
    #: the levels measured again; empty: every level of the sweep
    levels: list[Annotated[int, Field(gt=0)]] = Field(default_factory=list)
    #: how the leader waits between its windows: ``sleep`` (vLLM's sleep mode, level 1: the weights go
    #: to host memory, the KV cache is dropped; CUDA only), ``keep`` (awake beside the trial's server:
    #: the CPU build, or a GPU with room for both), ``auto`` (sleep on cuda, keep on cpu)
    park: Literal["auto", "sleep", "keep"] = "auto"
    #: host memory (GiB) left free beside what a parked leader holds there (a sleeper's weights, an
    #: awake CPU server's weights and KV cache); with less, the leader is let go, not parked
    host_reserve_gib: float = Field(default=8.0, ge=0.0, le=65536.0)

    @model_validator(mode="after")
    def _pairs(self) -> ConfirmSpec:
        if self.min_pairs > self.max_pairs:
            raise ValueError(f"min_pairs ({self.min_pairs}) is above max_pairs ({self.max_pairs})")
        return self


#: how the search is staged: one joint study, or tune the non-speculative stack first and then search
#: drafting on top of the best tuned configuration (each stage its own Optuna study)
STAGINGS: tuple[tuple[str, ...], ...] = (("joint",), ("tune",), ("tune", "speculative"), ("speculative",))


class SamplerSpec(StrictModel):
    #: the Optuna sampler: tpe (multivariate, grouped), gp, nsga2, random or grid
    name: Literal["tpe", "gp", "nsga2", "random", "grid"] = "tpe"
    #: seeds the sampler (numpy: 0 .. 2**32 - 1); null: a new seed each run
    seed: int | None = Field(default=0, ge=0, le=2**32 - 1)


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


#: the longest served model name (vLLM's ``--served-model-name``; a model id is far shorter)
MAX_SERVED_NAME = 256
#: the longest path (Linux's PATH_MAX)
MAX_PATH = 4096
#: an environment variable name as POSIX shells take it
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: control characters: C0, DEL, C1, line separators and bidirectional overrides (``redact.CONTROL``)
_CONTROL = redact.CONTROL


def _path_problem(value: str, limit: int = MAX_PATH, path: bool = True) -> str | None:
    """Why ``value`` cannot be a path or a name passed as one argument: empty, too long, a control
    character (a newline would end a line of an export), or a leading '-' (it would read as a flag:
    write ./-name)."""
    if not value.strip():
        return "is empty"
    if len(value) > limit:
        return f"is {len(value)} characters long; at most {limit}"
    if _CONTROL.search(value):
        return f"holds a control character ({redact.control_character(value)}); write it on one line"
    if value.startswith("-"):
        fix = f"write ./{value[:40]} for a path" if path else "a name starts with a letter or digit"
        return f"{value[:40]!r} starts with '-' and would read as a flag; {fix}"
    return None


def launch_problems(spec: StudySpec) -> list[str]:
    """What in ``spec`` could never launch a server or a load generator, each naming its field:
    checked at every validation, so a spec that would fail every trial is refused at ``create``."""
    problems: list[str] = []

    def check(field: str, value: str | None, limit: int = MAX_PATH, path: bool = True) -> None:
        problem = None if value is None else _path_problem(value, limit, path)
        if problem:
            problems.append(f"{field}: {problem}")

    check("model.path", spec.model.path)
    check("model.served_name", spec.model.served_name, MAX_SERVED_NAME, path=False)
    for method, drafter in spec.space.speculative.drafters.items():
        check(f"space.speculative.drafters.{method}", drafter)
    check("workload.path", spec.workload.path)
    check("workload.tokenizer", spec.workload.tokenizer)
    engine = spec.engine
    check("engine.python", engine.python)
    if engine.command is not None:
        for i, part in enumerate(engine.command):
            if not part.strip():
                problems.append(f"engine.command.{i}: an empty element; give the program and its words")
        if engine.command and engine.command[0].startswith("-"):
            problems.append(
                f"engine.command.0: {engine.command[0][:40]!r} is a flag; the first word is a program"
            )
    host = engine.host
    if not host or not host.strip() or _CONTROL.search(host) or " " in host or host.startswith("-"):
        problems.append(
            f"engine.host: {host[:60]!r} is not an address to bind to; give an IP address or a host name "
            "(127.0.0.1, the default, for loopback)"
        )
    elif len(host) > 253:
        problems.append(f"engine.host: {len(host)} characters long; a host name has at most 253")
    for name in engine.env:
        if not ENV_NAME.fullmatch(name):
            problems.append(
                f"engine.env: {name[:60]!r} is not an environment variable name (letters, digits and '_', "
                "not starting with a digit; no '=')"
            )
    for name, value in engine.env.items():
        c = redact.control_character(value) if ENV_NAME.fullmatch(name) else None
        if c is not None:
            problems.append(
                f"engine.env.{name}: the value holds a control character ({c}): an environment value "
                "here is one line (it goes into exports and shows in status)"
            )
    for i, arg in enumerate(engine.extra_args):
        if not arg:
            problems.append(f"engine.extra_args.{i}: an empty argument")
    for field, cores in (("engine.cpus", engine.cpus), ("sweep.client_cpus", spec.sweep.client_cpus)):
        high = [c for c in cores or () if c > MAX_CORE]
        if high:
            problems.append(
                f"{field}: core {high[0]} is above {MAX_CORE}, the highest core id accepted (ids run from 0 "
                "to the host's core count - 1; each worker checks them against its own cores as it starts)"
            )
    check("artifacts_dir", spec.artifacts_dir)
    c = redact.control_character(spec.storage or "")
    if c is not None:
        problems.append(f"storage: the URL holds a control character ({c}); give it on one plain line")
    return problems


class StudySpec(StrictModel):
    #: the study's name (stages get NAME.tune, NAME.speculative); a safe file name
    name: str

    @field_validator("name")
    @classmethod
    def _safe_name(cls, v: str) -> str:
        problem = study_name_problem(v)
        if problem:
            raise ValueError(problem)
        return v

    #: the model every trial serves
    model: ModelSpec
    #: how a server is launched: interpreter or command, device, pinning, environment
    engine: EngineSpec = Field(default_factory=EngineSpec)
    #: the knobs: each fixed, a range or choices; a knob left out is not passed
    space: SpaceSpec = Field(default_factory=SpaceSpec)
    #: what each request sends
    workload: WorkloadSpec = Field(default_factory=WorkloadSpec)
    #: the concurrency levels and how each is measured
    sweep: SweepSpec
    #: what the study optimizes: one or more {metric, direction, at}
    objectives: list[ObjectiveSpec] = Field(min_length=1)
    #: SLOs a feasible trial meets: 'ttft_p99_ms <= 500 at concurrency 4' or a mapping
    constraints: list[ConstraintSpec] = Field(default_factory=list)
    #: what each request must meet: bounds 'ttft p99 <= 500' (goodput counts the requests that meet every
    #: one; the capacity search judges loads by them). Leave out: every successful request counts as good
    slo: SLOSpec | None = None
    #: after the sweep, search the most load a trial carries at the SLO (needs ``slo``); null: no search
    capacity: CapacitySpec | None = None
    #: baseline trials enqueued first; "stock" runs the model on engine.defaults alone
    baselines: list[Literal["stock"]] = Field(default_factory=lambda: ["stock"])
    #: [joint] (one study), [tune], [tune, speculative], or [speculative] on a given ``tuned``
    stages: list[Literal["joint", "tune", "speculative"]] = Field(default_factory=lambda: ["joint"])
    #: a configuration already tuned (a team's production launch, say), on top of engine.defaults.
    #: The tune stage measures it first as a "reference" trial; with ``stages: [speculative]`` the
    #: drafter search builds on it directly
    tuned: EngineDefaults | None = None
    #: how many trials (counted across every worker)
    budget: BudgetSpec = Field(default_factory=BudgetSpec)
    #: the Optuna sampler and its seed
    sampler: SamplerSpec = Field(default_factory=SamplerSpec)
    #: stop dominated or infeasible trials after a level of the sweep; null (the default): every trial
    #: measures every level
    early_stop: EarlyStopSpec | None = None
    #: measure the trials on or near the front again, in ABBA windows against the leader kept resident;
    #: null (the default): every trial is measured sweep.repeats windows a level, once
    confirm: ConfirmSpec | None = None
    #: a SQLAlchemy URL (sqlite:///nova.db, postgresql+psycopg://...); --storage and NOVA_STORAGE override
    #: it; stored with the password masked
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
            drafters = ", ".join(m for m in SPEC_METHODS if m != "none")
            raise ValueError(
                f"stages: the speculative stage needs space.speculative.method to list a drafter ({drafters})"
            )
        extra = sorted(set(self.budget.per_stage) - set(self.stages))
        if extra:
            names = ", ".join(extra)
            raise ValueError(f"budget.per_stage: {names} is not a stage of this spec ({self.stages})")
        return self

    @model_validator(mode="after")
    def _launchable(self) -> StudySpec:
        problems = launch_problems(self)
        if problems:
            raise ValueError("\n  ".join(problems))
        return self

    @property
    def staged(self) -> bool:
        return self.stages != ["joint"]

    @property
    def closed_loop(self) -> bool:
        return self.workload.arrival.kind == "closed"

    def _capacity_problem(self) -> str | None:
        """What in the capacity search, or in an objective or constraint on its figures, cannot run."""
        figures = [(f"objectives.{i}.metric", o.metric) for i, o in enumerate(self.objectives)]
        figures += [(f"constraints.{i}.metric", c.metric) for i, c in enumerate(self.constraints)]
        figures = [(where, m) for where, m in figures if is_figure(m)]
        cap = self.capacity
        if cap is None:
            if figures:
                where, m = figures[0]
                return f"{where}: {m} comes from the capacity search: add `capacity:` (and an `slo`)"
            return None
        if self.slo is None:
            return "capacity: the search judges each load by the SLO: add `slo:` with at least one bound"
        if self.replays_trace:
            return (
                "capacity: the search bisects concurrency (closed loop) or a Poisson rate; a trace replay "
                "(workload.arrival kind trace) is measured at the speeds of sweep.speeds: drop `capacity:` "
                "or use a closed-loop or Poisson workload"
            )
        if self.closed_loop and (problem := cap.closed_loop_problem()):
            return problem
        for where, m in figures:
            if m == "cost_per_mtok" and not cap.gpu_hour_usd:
                return f"{where}: cost_per_mtok needs a price: capacity.gpu_hour_usd (e.g. {{H100: 2.5}})"
            if m == "joules_per_token" and self.engine.device != "cuda":
                return (
                    f"{where}: joules_per_token needs the GPU's power draw (nvidia-smi), and engine.device "
                    f"is {self.engine.device}: the CPU build has no power reading"
                )
        return None

    @property
    def replays_trace(self) -> bool:
        """Whether the levels are a trace's speeds (``workload.arrival`` kind trace)."""
        return isinstance(self.workload.arrival, TraceArrival)

    def level_name(self, key: int) -> str:
        """How level ``key`` reads: ``concurrency 4``, or a trace replay's ``speed 1.5x``."""
        return level_name(key, self.replays_trace)

    @model_validator(mode="after")
    def _speeds(self) -> StudySpec:
        if self.replays_trace and self.sweep.speeds is None:
            raise ValueError(
                "sweep.speeds: a trace replay (workload.arrival kind trace) measures speeds of the trace, "
                "not concurrency: give sweep.speeds, e.g. [0.5, 1, 2] (multiples of the trace's own rate)"
            )
        if not self.replays_trace and self.sweep.speeds is not None:
            raise ValueError(
                "sweep.speeds: only a trace replay (workload.kind trace, arrival kind trace) has speeds; "
                "give sweep.concurrency"
            )
        return self

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
        if self.confirm is not None:
            extra = sorted(set(self.confirm.levels) - levels)
            if extra:
                raise ValueError(f"confirm.levels: {extra} not in sweep.concurrency {sorted(levels)}")
            if self.confirm.park == "sleep" and self.engine.device == "cpu":
                raise ValueError(
                    "confirm.park: sleep needs vLLM's sleep mode, which the CPU build does not have "
                    "(engine.device is cpu); use keep or auto"
                )
        if problem := device_problem(self):  # synthetic acceptance on the CPU build (spec/acceptance.py)
            raise ValueError(problem)
        if problem := self._capacity_problem():
            raise ValueError(problem)
        names = [o.name for o in self.objectives]
        if len(set(names)) != len(names):
            raise ValueError(f"objectives repeat: {names}")
        return self
