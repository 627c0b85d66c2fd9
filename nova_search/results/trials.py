"""The read side's records: one ``TrialResult`` per trial, one ``StudyResults`` per study, frozen.

A ``TrialResult`` is Optuna's record plus nova's attributes decoded through ``schema`` (typed: an
``EngineConfig``, ``LevelResult`` per level, a ``WorkerTag``); a staged study's trials carry their
stage and a ``key`` (``speculative#3``) that names them across stages. Nothing here reads storage
(``results.load`` does) or chooses between trials (``results.select`` does).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from nova_search.analysis import projection
from nova_search.engine.command import deployable_argv
from nova_search.knobs import EngineConfig
from nova_search.measure.capacity import Capacity
from nova_search.measure.metrics import LevelResult
from nova_search.measure.objectives import Direction, Objective
from nova_search.measure.records import Paired, ReferenceOutputs
from nova_search.schema import SEARCH_ROLE, WorkerTag


def trial_key(number: int, stage: str = "joint") -> str:
    """A trial's name across the stages of one study: ``3`` unstaged, ``speculative#3`` staged."""
    return str(number) if stage == "joint" else f"{stage}#{number}"


@dataclass(frozen=True)
class TrialResult:
    """One trial as stored. ``values`` is None unless COMPLETE; ``feasible`` is True for a COMPLETE
    trial whose constraint values are all <= 0 (Optuna's convention; no constraints is feasible)."""

    number: int
    state: str
    role: str = SEARCH_ROLE
    params: dict[str, Any] = field(default_factory=dict)
    #: Optuna's distributions of the params, as ``optuna.distributions.distribution_to_json``
    distributions: dict[str, str] = field(default_factory=dict)
    #: what the trial ran; None when it never got that far (or nova did not write the study)
    config: EngineConfig | None = None
    values: tuple[float, ...] | None = None
    constraints: dict[str, float] = field(default_factory=dict)
    feasible: bool = False
    levels: tuple[LevelResult, ...] = ()
    argv: tuple[str, ...] = ()
    engine_version: str | None = None
    timing: dict[str, float] = field(default_factory=dict)
    reason: str | None = None
    message: str | None = None
    log_tail: str | None = None
    worker: WorkerTag | None = None
    datetime_start: datetime | None = None
    datetime_complete: datetime | None = None
    #: the number of the failed trial this one re-runs (a dead worker's trial), else None
    retry_of: int | None = None
    #: every headline metric of each measurement window, per level (``sweep.repeats`` >= 2)
    windows: dict[int, tuple[dict[str, float], ...]] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    #: the accelerator (or CPU) the levels were measured on, from nova's table
    device_name: str | None = None
    #: greedy outputs of the reference prompt set, None when not recorded
    reference: ReferenceOutputs | None = None
    #: the Optuna study the trial belongs to, and its stage ("joint" for an unstaged study)
    study: str = ""
    stage: str = "joint"
    #: windows measured again in ABBA pairs against the leader (``confirm``), None when not confirmed
    paired: Paired | None = None
    #: the capacity search at the SLO (``spec.capacity``), None when it did not run
    capacity: Capacity | None = None

    @property
    def figures(self) -> dict[str, float | None]:
        """The trial's figures (capacity per GPU, cost, energy: ``Capacity.figures``); empty without."""
        return self.capacity.figures() if self.capacity is not None else {}

    @property
    def key(self) -> str:
        """The trial's name across the stages of one study (``trial_key``)."""
        return trial_key(self.number, self.stage)

    @property
    def deployable_argv(self) -> tuple[str, ...]:
        """The launch argv without the per-trial host and port."""
        return tuple(deployable_argv(self.argv))

    @property
    def speculative(self) -> bool:
        """The trial ran a drafter."""
        return self.config is not None and self.config.speculative is not None

    @property
    def method(self) -> str:
        """The drafter's method, ``none`` without one."""
        spec = self.config.speculative if self.config else None
        return spec.method if spec else "none"

    @property
    def projected(self) -> str | None:
        """``projected at acceptance L=2.6`` when the drafter ran with synthetic acceptance: every figure
        of this trial is then a projection, not a measurement of that drafter (``analysis.projection``)."""
        return projection.label(self.config)

    @property
    def is_stock(self) -> bool:
        return self.role == "stock"

    @property
    def repeats(self) -> dict[int, tuple[float, ...]]:
        """Output tok/s of each measurement window, per level (empty with one window a level)."""
        return {
            c: tuple(w["output_throughput"] for w in ws if "output_throughput" in w)
            for c, ws in self.windows.items()
        }

    @property
    def client_bound_levels(self) -> tuple[int, ...]:
        """Levels where the load generator, not the server, may have set the figures."""
        return tuple(lv.concurrency for lv in self.levels if getattr(lv, "client_bound", None))

    @property
    def gpus(self) -> int:
        """GPUs the trial's server held (its tensor_parallel_size; 1 when the configuration is unknown)."""
        return self.config.gpus if self.config is not None else 1

    @property
    def peak_throughput(self) -> float | None:
        """The highest output tok/s of its levels, per server; None without a measured level."""
        values = [lv.output_throughput for lv in self.levels if lv.output_throughput is not None]
        return max(values) if values else None

    @property
    def peak_throughput_per_gpu(self) -> float | None:
        """``peak_throughput`` per GPU the server held: what a GPU of this configuration delivers, the
        figure that compares a tensor-parallel server with one on a single GPU."""
        peak = self.peak_throughput
        return None if peak is None else peak / self.gpus

    @property
    def duration_s(self) -> float | None:
        if self.datetime_start is None or self.datetime_complete is None:
            return None
        return (self.datetime_complete - self.datetime_start).total_seconds()

    def level(self, concurrency: int) -> LevelResult | None:
        for lv in self.levels:
            if lv.concurrency == concurrency:
                return lv
        return None


@dataclass(frozen=True)
class StudyResults:
    """Everything one study holds, read once. ``trials`` are in stage, then trial-number order."""

    study_name: str
    #: the storage URL with its password masked
    storage: str
    objectives: tuple[Objective, ...]
    trials: tuple[TrialResult, ...]
    #: the Pareto front (feasible COMPLETE trials no other dominates), by trial key
    front_keys: tuple[str, ...] = ()
    #: the spec as the study stores it, raw; None for a study nova did not create
    spec: dict[str, Any] | None = None
    #: trials that used up the budget (``db.count_toward_budget``), over every stage
    budget_used: int = 0
    #: the stages, in order, of a staged study read by its name; () for one Optuna study
    stages: tuple[str, ...] = ()
    #: a trace workload's summary (``schema.TRACE``: sizes, rate, histograms); None for other workloads
    trace: dict[str, Any] | None = None

    @property
    def replays_trace(self) -> bool:
        """Whether the levels are a trace's speeds, keyed in percent (``spec.level_name``)."""
        try:
            return bool(self.spec) and self.spec["workload"]["arrival"]["kind"] == "trace"  # type: ignore[index]
        except (KeyError, TypeError):
            return False

    def on_front(self, t: TrialResult) -> bool:
        return t.key in self.front_keys

    @property
    def directions(self) -> tuple[Direction, ...]:
        return tuple(o.direction for o in self.objectives)

    @property
    def budget(self) -> int | None:
        """The trial budget; for a staged study read by its name, the sum over its stages."""
        try:
            if not self.spec:
                return None
            n = int(self.spec["budget"]["n_trials"])
            if not self.stages:
                return n
            per = self.spec["budget"].get("per_stage") or {}
            return sum(int(per.get(st, n)) for st in self.spec.get("stages") or self.stages)
        except (KeyError, TypeError, ValueError, AttributeError):
            return None

    def trial(self, key: int | str) -> TrialResult:
        """A trial by key (``speculative#3``), or by number where that is unambiguous."""
        text = str(key)
        for t in self.trials:
            if t.key == text:
                return t
        same = [t for t in self.trials if str(t.number) == text]
        if len(same) == 1:
            return same[0]
        keys = ", ".join(t.key for t in same)
        hint = f" (several stages have it: give one of {keys})" if same else ""
        raise KeyError(f"study {self.study_name!r} has no trial {key}{hint}")

    def complete(self) -> list[TrialResult]:
        return [t for t in self.trials if t.state == "COMPLETE"]

    def feasible(self) -> list[TrialResult]:
        return [t for t in self.trials if t.feasible]

    def stock(self) -> TrialResult | None:
        """The stock baseline: the first COMPLETE stock trial, else the first stock trial at all."""
        stock = [t for t in self.trials if t.is_stock]
        done = [t for t in stock if t.state == "COMPLETE"]
        return (done or stock or [None])[0]

    def pareto(self) -> list[TrialResult]:
        return [t for t in self.trials if self.on_front(t)]
