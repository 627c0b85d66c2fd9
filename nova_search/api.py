"""Read a study's results: a small Python API over Optuna's storage and nova's tables.

Everything here reads; nothing writes to storage (Optuna's tables are never created by a read).

    from nova_search import api

    results = api.load_results("my-model", "postgresql+psycopg://nova@db/nova")
    top = api.best("my-model", url, objective="output_throughput@best",
                   where=[api.parse_condition("ttft_p99_ms<=500@32")])[0]
    print(top.number, top.values, api.export_launch(top, "vllm"))

- ``load_results`` -> ``StudyResults``: frozen records, one ``TrialResult`` per trial (state, role,
  params, config, objective values, constraints and feasibility, the measured ``LevelResult`` per
  level, the launch argv and its deployable form, engine version, timing, failure reason).
- ``best`` / ``best_of``: feasible COMPLETE trials, either the single best by one metric or the
  Pareto front (Optuna's ``study.best_trials``), optionally restricted by ``Condition``s.
- ``parse_condition("ttft_p99_ms<=500@32")``: metric, operator (``<=``, ``>=``, ``<``, ``>``), value
  and level; a level that was not measured makes the condition false.
- ``export_launch(trial, "vllm" | "compose" | "k8s")``: the configuration as something to deploy.

Storage and study errors raise ``StorageError`` with the password masked; bad metric names and
unreadable conditions raise ``SpecError``.
"""

from __future__ import annotations

import json
import math
import re
import shlex
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import optuna
import yaml
from optuna.trial import FrozenTrial
from sqlalchemy.exc import OperationalError, SQLAlchemyError

from nova_search.analysis.equivalence import Equivalence, compare_outputs
from nova_search.analysis.verdict import Profile, Verdict, build_verdict, choose_tuned
from nova_search.db._url import engine_kwargs, mask, parse
from nova_search.engine.command import API_SERVER_MODULE, deployable_argv
from nova_search.errors import NovaError, SpecError, StorageError
from nova_search.loadgen.reference import outputs_from_dict
from nova_search.metrics import METRIC_NAMES, LevelResult
from nova_search.records import ReferenceOutputs
from nova_search.space import ROLE_ATTR
from nova_search.study import PARENT_ATTR, SPEC_ATTR, STAGE_ATTR, count_toward_budget
from nova_search.trial import (
    A_ARGV,
    A_CONFIG,
    A_ENGINE_VERSION,
    A_LEVELS,
    A_LOG_TAIL,
    A_MESSAGE,
    A_REASON,
    A_TIMING,
    A_WORKER,
)

Direction = Literal["maximize", "minimize"]
ExportFormat = Literal["vllm", "compose", "k8s"]
EXPORT_FORMATS: tuple[str, ...] = ("vllm", "compose", "k8s")

#: the role of a trial that is not a baseline
SEARCH_ROLE = "search"
#: attributes written by newer workers (trial.A_REPEATS, trial.A_WARNINGS); absent on older trials
A_REPEATS = "nova:repeats"
A_WARNINGS = "nova:warnings"
A_REFERENCE = "nova:reference_outputs"

#: metrics where lower is better when a direction has to be guessed (not an objective of the study)
_LOWER_IS_BETTER = frozenset(
    {"error_rate", "errors", "duration_s", "preemptions", "num_waiting_mean", "num_waiting_max"}
)


def higher_is_better(metric: str) -> bool:
    """The natural direction of a LevelResult metric: latencies (``*_ms``), errors, preemptions and
    queue depth are better low; throughputs, goodput, acceptance and hit rates better high."""
    return not (metric.endswith("_ms") or metric in _LOWER_IS_BETTER)


# ---------------------------------------------------------------- records


@dataclass(frozen=True)
class Objective:
    """One objective of the study as Optuna shows it (``name`` = ``metric@at``)."""

    name: str
    metric: str
    at: int | Literal["best"]
    direction: Direction
    #: position in the trial's ``values``; None for a metric that is not an objective of the study
    index: int | None = None

    @property
    def maximize(self) -> bool:
        return self.direction == "maximize"


@dataclass(frozen=True)
class TrialResult:
    """One trial as stored: Optuna's record plus nova's attributes, decoded.

    ``values`` is None unless COMPLETE. ``feasible`` is True for a COMPLETE trial whose constraint
    values are all <= 0 (Optuna's convention; no constraints counts as feasible). ``levels`` come
    from the ``nova:levels`` attribute, else from nova's ``nova_level_result`` table.
    """

    number: int
    state: str
    role: str
    params: dict[str, Any] = field(default_factory=dict)
    #: Optuna's distributions of the params, as ``optuna.distributions.distribution_to_json``
    distributions: dict[str, str] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    values: tuple[float, ...] | None = None
    constraints: dict[str, float] = field(default_factory=dict)
    feasible: bool = False
    levels: tuple[LevelResult, ...] = ()
    argv: tuple[str, ...] = ()
    deployable_argv: tuple[str, ...] = ()
    engine_version: str | None = None
    timing: dict[str, float] = field(default_factory=dict)
    reason: str | None = None
    message: str | None = None
    worker: dict[str, Any] | None = None
    datetime_start: datetime | None = None
    datetime_complete: datetime | None = None
    #: the number of the failed trial this one re-runs (a dead worker's trial), else None
    retry_of: int | None = None
    #: output tok/s of each measurement window, per level (``sweep.repeats`` >= 2), else empty
    repeats: dict[int, tuple[float, ...]] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    #: the accelerator (or CPU) the levels were measured on, from nova's table
    device_name: str | None = None
    #: every headline metric of each measurement window, per level (``sweep.repeats`` >= 2)
    windows: dict[int, tuple[dict[str, float], ...]] = field(default_factory=dict)
    #: greedy outputs of the reference prompt set (``nova:reference_outputs``), None when not recorded
    reference: ReferenceOutputs | None = None
    #: the Optuna study the trial belongs to, and its stage ("joint" for an unstaged study)
    study: str = ""
    stage: str = "joint"
    #: the end of the server log of a FAIL trial (``nova:log_tail``), else None
    log_tail: str | None = None

    @property
    def duration_s(self) -> float | None:
        if self.datetime_start is None or self.datetime_complete is None:
            return None
        return (self.datetime_complete - self.datetime_start).total_seconds()

    @property
    def is_stock(self) -> bool:
        return self.role == "stock"

    @property
    def key(self) -> str:
        """The trial's name across the stages of one study: ``3`` unstaged, ``speculative#3`` staged."""
        return str(self.number) if self.stage == "joint" else f"{self.stage}#{self.number}"

    def level(self, concurrency: int) -> LevelResult | None:
        for lv in self.levels:
            if lv.concurrency == concurrency:
                return lv
        return None


@dataclass(frozen=True)
class StudyResults:
    """Everything one study holds, read once. ``trials`` are in trial-number order."""

    study_name: str
    #: the storage URL with its password masked
    storage: str
    objectives: tuple[Objective, ...]
    trials: tuple[TrialResult, ...]
    #: trial numbers of Optuna's Pareto front (``study.best_trials``: feasible COMPLETE trials)
    pareto_numbers: tuple[int, ...] = ()
    #: the spec as the study stores it (``nova:spec``), raw; None for a study nova did not create
    spec: dict[str, Any] | None = None
    #: trials that used up the budget (``study.count_toward_budget``)
    budget_used: int = 0
    #: the stages, in order, of a staged study read by its name; () for one Optuna study
    stages: tuple[str, ...] = ()
    #: the Pareto front by trial key (a staged study's front spans its stages); None: pareto_numbers
    front_keys: tuple[str, ...] | None = None

    def on_front(self, t: TrialResult) -> bool:
        if self.front_keys is not None:
            return t.key in self.front_keys
        return t.number in self.pareto_numbers

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

    def trial(self, number: int | str) -> TrialResult:
        """A trial by number, or by key (``speculative#3``) in a staged study."""
        text = str(number)
        for t in self.trials:
            if t.key == text or (t.number == number and self.front_keys is None):
                return t
        raise KeyError(f"study {self.study_name!r} has no trial {number}")

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


# ---------------------------------------------------------------- metrics and conditions


def _as_float(v: Any) -> float | None:
    if v is None or isinstance(v, bool) or not isinstance(v, int | float):
        return None
    f = float(v)
    return f if math.isfinite(f) else None


def metric_value(
    trial: TrialResult, metric: str, at: int | str | None, direction: Direction | None = None
) -> float | None:
    """One metric of a trial: at level ``at`` (None when that level was not measured), or ``best``
    (the best over the levels in ``direction``, guessed from the metric when None)."""
    if at == "best":
        vals = [v for lv in trial.levels if (v := _as_float(getattr(lv, metric, None))) is not None]
        if not vals:
            return None
        maximize = direction == "maximize" if direction else higher_is_better(metric)
        return max(vals) if maximize else min(vals)
    lv = trial.level(int(at)) if at is not None else None
    return None if lv is None else _as_float(getattr(lv, metric, None))


def objective_of(trial: TrialResult, objective: Objective) -> float | None:
    """The trial's value of ``objective``: Optuna's stored value for an objective of the study,
    else computed from the levels."""
    if objective.index is not None:
        if trial.values is None or objective.index >= len(trial.values):
            return None
        return trial.values[objective.index]
    return metric_value(trial, objective.metric, objective.at, objective.direction)


def _metric_list() -> str:
    return ", ".join(METRIC_NAMES)


def _parse_at(text: str, what: str) -> int | Literal["best"]:
    if text == "best":
        return "best"
    try:
        at = int(text)
    except ValueError:
        raise SpecError(f"{what}: the level {text!r} is not a concurrency (an integer) nor 'best'") from None
    if at <= 0:
        raise SpecError(f"{what}: the level must be a positive concurrency (got {at})")
    return at


def resolve_objective(text: str, objectives: Sequence[Objective] = ()) -> Objective:
    """``output_throughput@best``, ``ttft_p99_ms@32`` or a plain metric (``@best``) -> an Objective.

    A name of one of the study's ``objectives`` is that objective (its direction, its stored value);
    any other LevelResult metric takes the direction of a study objective on the same metric, else
    its natural one (``higher_is_better``)."""
    name = text.strip()
    for o in objectives:
        if o.name == name:
            return o
    metric, _, at_text = name.partition("@")
    metric = metric.strip()
    if metric not in METRIC_NAMES:
        raise SpecError(
            f"unknown metric {metric!r} in objective {text!r}; give metric@level (e.g. "
            f"output_throughput@best, ttft_p99_ms@32) with a metric of: {_metric_list()}"
        )
    at = _parse_at(at_text.strip() or "best", f"objective {text!r}")
    for o in objectives:
        if o.name == f"{metric}@{at}":
            return o
    same = [o for o in objectives if o.metric == metric]
    direction: Direction = (
        same[0].direction if same else ("maximize" if higher_is_better(metric) else "minimize")
    )
    return Objective(f"{metric}@{at}", metric, at, direction)


_CONDITION_RE = re.compile(
    r"^\s*(?P<metric>[a-z0-9_]+)\s*(?P<op><=|>=|<|>)\s*(?P<value>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"
    r"\s*(?:@\s*(?P<at>\S+))?\s*$"
)
_OPS = {
    "<=": lambda a, b: a <= b,
    ">=": lambda a, b: a >= b,
    "<": lambda a, b: a < b,
    ">": lambda a, b: a > b,
}


@dataclass(frozen=True)
class Condition:
    """``metric op value @ level``, e.g. ``ttft_p99_ms<=500@32``.

    ``at`` is a concurrency level, ``best`` (the metric's best level) or None (every measured level
    must hold). It is false when the level was not measured or the metric is undefined there."""

    metric: str
    op: Literal["<=", ">=", "<", ">"]
    value: float
    at: int | Literal["best"] | None = None

    def __str__(self) -> str:
        return f"{self.metric}{self.op}{self.value:g}" + ("" if self.at is None else f"@{self.at}")

    def holds(self, trial: TrialResult) -> bool:
        test = _OPS[self.op]
        if self.at is None:
            if not trial.levels:
                return False
            vals = [_as_float(getattr(lv, self.metric, None)) for lv in trial.levels]
            return all(v is not None and test(v, self.value) for v in vals)
        v = metric_value(trial, self.metric, self.at)
        return v is not None and test(v, self.value)


def parse_condition(text: str) -> Condition:
    """Read ``metric<=value@level`` (ops ``<=``, ``>=``, ``<``, ``>``; ``@level`` optional: without
    it every level must hold). Raises SpecError naming what is wrong and the valid forms."""
    if isinstance(text, Condition):
        return text
    m = _CONDITION_RE.match(text or "")
    if not m:
        raise SpecError(
            f"cannot read condition {text!r}; write metric OP value[@level], e.g. 'ttft_p99_ms<=500@32' "
            "(OP one of <=, >=, <, >; level a concurrency or best)"
        )
    metric = m["metric"]
    if metric not in METRIC_NAMES:
        raise SpecError(f"condition {text!r}: unknown metric {metric!r}; valid: {_metric_list()}")
    at = None if m["at"] is None else _parse_at(m["at"], f"condition {text!r}")
    return Condition(metric, m["op"], float(m["value"]), at)  # type: ignore[arg-type]


# ---------------------------------------------------------------- selection (pure)


def _key(objective: Objective, trial: TrialResult) -> tuple[float, int]:
    v = objective_of(trial, objective)
    assert v is not None
    return (-v if objective.maximize else v, trial.number)


def _dominates(a: Sequence[float], b: Sequence[float], directions: Sequence[Direction]) -> bool:
    better = False
    for x, y, d in zip(a, b, directions, strict=True):
        x, y = (-x, -y) if d == "maximize" else (x, y)
        if x > y:
            return False
        if x < y:
            better = True
    return better


def pareto_front(trials: Iterable[TrialResult], directions: Sequence[Direction]) -> list[TrialResult]:
    """The trials no other one dominates (by their objective values), in trial-number order."""
    pool = [t for t in trials if t.values is not None and len(t.values) == len(directions)]
    return [
        t
        for t in pool
        if not any(_dominates(o.values, t.values, directions) for o in pool if o is not t)  # type: ignore[arg-type]
    ]


def best_of(
    results: StudyResults,
    *,
    objective: str | Objective | None = None,
    where: Sequence[Condition | str] = (),
) -> list[TrialResult]:
    """``best`` over results already loaded. Candidates: feasible COMPLETE trials that meet every
    condition. With ``objective``: a one-element list, the best by it (ties: the lower number), or
    empty. Without: the Pareto front (Optuna's ``study.best_trials`` when there are no conditions,
    else the non-dominated candidates), sorted best first by the first objective."""
    conditions = [parse_condition(c) if isinstance(c, str) else c for c in where]
    candidates = [t for t in results.feasible() if all(c.holds(t) for c in conditions)]
    if objective is not None:
        o = (
            objective
            if isinstance(objective, Objective)
            else resolve_objective(objective, results.objectives)
        )
        scored = [t for t in candidates if objective_of(t, o) is not None]
        return [min(scored, key=lambda t: _key(o, t))] if scored else []
    if conditions:
        front = pareto_front(candidates, results.directions)
    else:
        front = [t for t in candidates if results.on_front(t)]
    if results.objectives:
        first = results.objectives[0]
        front.sort(
            key=lambda t: _key(first, t) if objective_of(t, first) is not None else (math.inf, t.number)
        )
    return front


def top_trial(results: StudyResults) -> TrialResult | None:
    """The top feasible COMPLETE trial by the study's first objective (None when there is none)."""
    if not results.objectives:
        return None
    found = best_of(results, objective=results.objectives[0])
    return found[0] if found else None


# ---------------------------------------------------------------- loading


def _open(storage_url: str) -> optuna.storages.RDBStorage:
    parsed = parse(storage_url)
    masked = mask(storage_url)
    if parsed.get_backend_name() == "sqlite":
        db = parsed.database
        if db not in (None, "", ":memory:") and not Path(db).exists():
            raise StorageError(f"cannot open storage {masked}: no such database file {db!r}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return optuna.storages.RDBStorage(
                storage_url, engine_kwargs=engine_kwargs(parsed), skip_table_creation=True
            )
    except (SQLAlchemyError, ImportError, ValueError, TypeError) as e:
        raise StorageError(f"cannot open storage {masked}: {type(e).__name__}") from None
    except optuna.exceptions.OptunaError as e:
        # Optuna wraps the driver's error (whose message can echo the URL): name its kind only
        cause = e.__cause__
        if isinstance(cause, OperationalError):
            hint = "is the server up, the URL right?"
        else:
            hint = "no Optuna study tables there? check the database name"
        raise StorageError(f"cannot open storage {masked}: {type(cause or e).__name__} ({hint})") from None
    except RuntimeError as e:  # Optuna's schema-version check: its message names versions only
        raise StorageError(f"cannot open storage {masked}: {e}") from None


def _objectives(study: optuna.Study) -> tuple[Objective, ...]:
    names = study.metric_names or [f"value{i}" for i in range(len(study.directions))]
    out = []
    for i, (name, d) in enumerate(zip(names, study.directions, strict=True)):
        direction: Direction = "maximize" if d == optuna.study.StudyDirection.MAXIMIZE else "minimize"
        metric, _, at_text = name.partition("@")
        at: int | Literal["best"] = int(at_text) if at_text.isdigit() else "best"
        out.append(Objective(name, metric, at, direction, i))
    return tuple(out)


def _levels(attrs: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> tuple[LevelResult, ...]:
    stored = attrs.get(A_LEVELS)
    if isinstance(stored, list) and stored:
        return tuple(LevelResult.from_dict(d) for d in stored if isinstance(d, dict))
    out = []
    for r in rows:
        profile = r.get("profile")
        if isinstance(profile, dict) and "concurrency" in profile:
            out.append(LevelResult.from_dict(profile))
    return tuple(sorted(out, key=lambda lv: lv.concurrency))


def _floats(d: Any) -> dict[str, float]:
    if not isinstance(d, dict):
        return {}
    return {str(k): float(v) for k, v in d.items() if _as_float(v) is not None}


def _windows(stored: Any) -> dict[int, tuple[dict[str, float], ...]]:
    """``nova:repeats`` ({level: [{metric: value}, ...]}) -> every metric of each window, per level."""
    out: dict[int, tuple[dict[str, float], ...]] = {}
    if not isinstance(stored, dict):
        return out
    for level, windows in stored.items():
        try:
            c = int(level)
        except (TypeError, ValueError):
            continue
        if isinstance(windows, list):
            out[c] = tuple(_floats(w) for w in windows if isinstance(w, dict))
    return out


def _reference(stored: Any) -> ReferenceOutputs | None:
    if not isinstance(stored, dict):
        return None
    try:
        return outputs_from_dict(stored)
    except (KeyError, TypeError, ValueError):
        return None


def trial_result(t: FrozenTrial, rows: Sequence[Mapping[str, Any]] = ()) -> TrialResult:
    """Decode one Optuna trial (and its rows of ``nova_level_result``, if any)."""
    attrs = t.user_attrs
    windows = _windows(attrs.get(A_REPEATS))
    argv = tuple(str(a) for a in attrs.get(A_ARGV) or ())
    if not argv:
        for r in rows:
            if r.get("argv"):
                argv = tuple(str(a) for a in r["argv"])
                break
    version = attrs.get(A_ENGINE_VERSION)
    if version is None:
        version = next((r.get("engine_version") for r in rows if r.get("engine_version")), None)
    constraints = {str(k): float(v) for k, v in t.constraints.items()}
    state = t.state.name
    values = tuple(float(v) for v in t.values) if state == "COMPLETE" and t.values is not None else None
    retry_of = t.system_attrs.get("failed_trial")
    return TrialResult(
        number=t.number,
        state=state,
        role=str(attrs.get(ROLE_ATTR) or SEARCH_ROLE),
        params=dict(t.params),
        distributions={k: optuna.distributions.distribution_to_json(d) for k, d in t.distributions.items()},
        config=dict(attrs.get(A_CONFIG) or {}),
        values=values,
        constraints=constraints,
        feasible=state == "COMPLETE" and all(v <= 0.0 for v in constraints.values()),
        levels=_levels(attrs, rows),
        argv=argv,
        deployable_argv=tuple(deployable_argv(argv)),
        engine_version=None if version is None else str(version),
        timing=_floats(attrs.get(A_TIMING)),
        reason=attrs.get(A_REASON),
        message=attrs.get(A_MESSAGE),
        worker=attrs.get(A_WORKER) if isinstance(attrs.get(A_WORKER), dict) else None,
        datetime_start=t.datetime_start,
        datetime_complete=t.datetime_complete,
        retry_of=int(retry_of) if isinstance(retry_of, int) else None,
        repeats={
            c: tuple(w["output_throughput"] for w in ws if "output_throughput" in w)
            for c, ws in windows.items()
        },
        warnings=tuple(str(w) for w in attrs.get(A_WARNINGS) or ()),
        device_name=next((str(r["gpu_name"]) for r in rows if r.get("gpu_name")), None),
        windows=windows,
        reference=_reference(attrs.get(A_REFERENCE)),
        log_tail=str(attrs[A_LOG_TAIL]) if attrs.get(A_LOG_TAIL) else None,
    )


def _level_rows(storage_url: str, study_name: str) -> dict[int, list[dict[str, Any]]]:
    """nova's per-level rows by trial number; empty when nova's tables are not there (optional)."""
    from nova_search.db import LevelStore

    try:
        with LevelStore(storage_url, retry_window_s=5.0) as store:
            rows = store.rows(study_name)
    except NovaError:
        return {}
    out: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault(int(r["trial_number"]), []).append(r)
    return out


def _stage_names(storage: optuna.storages.RDBStorage, study_name: str, names: list[str]) -> list[str]:
    """The Optuna studies of a staged study named ``study_name`` (``NAME.tune``, ``NAME.speculative``),
    in stage order; [] when there are none."""
    found = []
    for stage in ("tune", "speculative"):
        n = f"{study_name}.{stage}"
        if n in names:
            attrs = storage.get_study_user_attrs(storage.get_study_id_from_name(n))
            if attrs.get(PARENT_ATTR) == study_name:
                found.append(n)
    return found


def load_results(study_name: str, storage_url: str) -> StudyResults:
    """Read every trial of ``study_name`` once. A staged study is read by the name it was created
    with: its stages' trials together, each with its ``stage`` and ``key`` (``speculative#3``).
    Raises StorageError (password masked) when the storage cannot be read or holds no such study."""
    masked = mask(storage_url)
    storage = _open(storage_url)
    try:
        try:
            names = optuna.study.get_all_study_names(storage)
            staged = [] if study_name in names else _stage_names(storage, study_name, names)
        except (SQLAlchemyError, optuna.exceptions.OptunaError) as e:
            raise StorageError(
                f"cannot read storage {masked}: {type(e).__name__} (is it an Optuna storage, the server up?)"
            ) from None
        if study_name not in names and not staged:
            shown = ", ".join(sorted(names)[:10]) or "none"
            raise StorageError(f"no study named {study_name!r} in {masked} (studies there: {shown})")
        parts = []
        for name in staged or [study_name]:
            try:
                study = optuna.load_study(study_name=name, storage=storage)
            except (SQLAlchemyError, optuna.exceptions.OptunaError) as e:
                raise StorageError(f"cannot read study {name!r} from {masked}: {type(e).__name__}") from None
            parts.append(study_results(study, masked, _level_rows(storage_url, name)))
        return parts[0] if not staged else merge_stages(study_name, parts)
    finally:
        storage.engine.dispose()


def merge_stages(study_name: str, parts: Sequence[StudyResults]) -> StudyResults:
    """One view of a staged study: every stage's trials (keys tell them apart), the Pareto front over
    all of them, the budget used in every stage."""
    first = parts[0]
    trials = tuple(t for p in parts for t in p.trials)
    feasible = [t for t in trials if t.feasible]
    front = pareto_front(feasible, first.directions)
    return StudyResults(
        study_name=study_name,
        storage=first.storage,
        objectives=first.objectives,
        trials=trials,
        pareto_numbers=(),
        spec=first.spec,
        budget_used=sum(p.budget_used for p in parts),
        stages=tuple(t.stage for t in (p.trials[0] for p in parts if p.trials)),
        front_keys=tuple(t.key for t in front),
    )


def study_results(
    study: optuna.Study, storage: str, rows: Mapping[int, Sequence[Mapping[str, Any]]] | None = None
) -> StudyResults:
    """``StudyResults`` of a study already open (a worker's, say). ``storage`` is the URL to show,
    masked; ``rows``: nova's per-level rows by trial number, for trials without ``nova:levels``.
    Raises StorageError when the storage cannot be read."""
    try:
        frozen = study.get_trials(deepcopy=False)
        pareto = tuple(sorted(t.number for t in study.best_trials))
        spec = study.user_attrs.get(SPEC_ATTR)
        objectives = _objectives(study)
    except (SQLAlchemyError, optuna.exceptions.OptunaError) as e:
        raise StorageError(
            f"cannot read study {study.study_name!r} from {storage}: {type(e).__name__}"
        ) from None
    rows = rows or {}
    stage = str(study.user_attrs.get(STAGE_ATTR, "joint"))
    trials = tuple(
        replace(trial_result(t, rows.get(t.number, ())), study=study.study_name, stage=stage)
        for t in sorted(frozen, key=lambda t: t.number)
    )
    return StudyResults(
        study_name=study.study_name,
        storage=storage,
        objectives=objectives,
        trials=trials,
        pareto_numbers=pareto,
        spec=spec if isinstance(spec, dict) else None,
        budget_used=count_toward_budget(list(frozen)),
    )


def best(
    study_name: str,
    storage_url: str,
    *,
    objective: str | None = None,
    where: Sequence[Condition | str] = (),
) -> list[TrialResult]:
    """The best feasible COMPLETE trials of a study (see ``best_of``): with ``objective`` (an
    objective name such as ``output_throughput@best``, or ``metric@level``) the single best by it;
    without, the Pareto front. ``where``: conditions (``ttft_p99_ms<=500@32``) every trial must meet."""
    conditions = [parse_condition(c) if isinstance(c, str) else c for c in where]
    if objective is not None:
        resolve_objective(objective)  # a bad name fails before storage is touched
    results = load_results(study_name, storage_url)
    return best_of(results, objective=objective, where=conditions)


# ---------------------------------------------------------------- plain data and export


def trial_dict(trial: TrialResult, objectives: Sequence[Objective] = ()) -> dict[str, Any]:
    """A JSON-ready summary of one trial: number, role, state, values by objective name, params,
    config, constraints, argv and deployable argv, engine version."""
    values: dict[str, float] | None = None
    if trial.values is not None:
        names = [o.name for o in objectives] or [f"value{i}" for i in range(len(trial.values))]
        values = dict(zip(names, trial.values, strict=False))
    return {
        "number": trial.number,
        "key": trial.key,
        "stage": trial.stage,
        "study": trial.study,
        "state": trial.state,
        "role": trial.role,
        "feasible": trial.feasible,
        "values": values,
        "params": trial.params,
        "config": trial.config,
        "constraints": trial.constraints,
        "argv": list(trial.argv),
        "deployable_argv": list(trial.deployable_argv),
        "engine_version": trial.engine_version,
    }


def study_dict(results: StudyResults) -> dict[str, Any]:
    """The whole study as plain data (``nova-search dump``): objectives, spec, and every trial with
    its params, values, per-level profiles, timing (boot, measurement, total), engine version,
    worker and device."""
    trials = []
    for t in results.trials:
        d = trial_dict(t, results.objectives)
        d.update(
            levels=[lv.as_dict() for lv in t.levels],
            timing=t.timing,
            duration_s=t.duration_s,
            datetime_start=t.datetime_start,
            datetime_complete=t.datetime_complete,
            reason=t.reason,
            message=t.message,
            warnings=list(t.warnings),
            worker=t.worker,
            device_name=t.device_name,
            retry_of=t.retry_of,
        )
        trials.append(d)
    return {
        "study": results.study_name,
        "storage": results.storage,
        "objectives": [o.name for o in results.objectives],
        "directions": [o.direction for o in results.objectives],
        "budget_used": results.budget_used,
        "pareto": list(results.pareto_numbers),
        "spec": results.spec,
        "trials": trials,
    }


def launch_parts(argv: Sequence[str]) -> tuple[list[str], str | None, list[str]]:
    """Split a deployable argv into (entry point, model, engine flags).

    ``python -m vllm.entrypoints.openai.api_server --model M ...`` gives the model of ``--model``;
    any other form (``vllm serve M ...``, a wrapper) takes the argument before the first flag as the
    model. Flags keep their order."""
    args = list(argv)
    if "--model" in args:
        i = args.index("--model")
        model = args[i + 1] if i + 1 < len(args) else None
        entry = args[:i]
        flags = args[i + 2 :]
        if API_SERVER_MODULE not in entry:
            # ``--model`` appeared after other flags: the entry point ends at the first flag
            first = next((j for j, a in enumerate(entry) if a.startswith("--")), len(entry))
            flags = entry[first:] + flags
            entry = entry[:first]
        return entry, model, flags
    first = next((j for j, a in enumerate(args) if a.startswith("--")), len(args))
    if first == 0:
        return [], None, args
    return args[: first - 1], args[first - 1], args[first:]


def _gpus(trial: TrialResult) -> int:
    tp = trial.config.get("tensor_parallel_size")
    return int(tp) if isinstance(tp, int) and tp > 0 else 1


def _image(trial: TrialResult, image: str | None) -> str:
    if image:
        return image
    version = (trial.engine_version or "").split("+", 1)[0].strip()
    tag = f"v{version}" if re.fullmatch(r"\d+\.\d+\.\d+(\.post\d+)?", version) else "latest"
    return f"vllm/vllm-openai:{tag}"


def _container_args(trial: TrialResult) -> list[str]:
    _entry, model, flags = launch_parts(trial.deployable_argv)
    return (["--model", model] if model else []) + flags


def export_launch(
    trial: TrialResult,
    fmt: ExportFormat | str,
    *,
    name: str = "vllm",
    image: str | None = None,
    port: int = 8000,
) -> str:
    """The trial's configuration, ready to deploy.

    - ``vllm``: the deployable argv (host and port removed) as one shell-quoted line (``shlex.join``),
      exactly what the trial ran.
    - ``compose``: a docker compose file with one service on ``vllm/vllm-openai`` (tagged with the
      engine version the trial measured, else ``latest``; ``image`` overrides), the model and flags
      as ``command:``, the port published, and a GPU reservation (``tensor_parallel_size`` GPUs).
    - ``k8s``: a Deployment with the same image, the flags as container ``args``, a readiness probe
      on ``/health`` and ``nvidia.com/gpu`` limits.

    The model is the path the study used: mount it into the container or replace it with a hub id.
    Raises SpecError for another format, NovaError when the trial has no launch argv (never launched).
    """
    if fmt not in EXPORT_FORMATS:
        raise SpecError(f"unknown export format {fmt!r}; valid: {', '.join(EXPORT_FORMATS)}")
    if not trial.deployable_argv:
        raise NovaError(
            f"trial {trial.number} has no launch argv ({trial.state}: it never launched a server)"
        )
    if fmt == "vllm":
        return shlex.join(trial.deployable_argv)
    args = _container_args(trial)
    gpus = _gpus(trial)
    img = _image(trial, image)
    header = (
        f"# nova-search: trial {trial.number} ({trial.role}, engine {trial.engine_version or 'unknown'})\n"
        "# the model path is the one the study used: mount it or replace it with a hub id\n"
    )
    if fmt == "compose":
        doc: dict[str, Any] = {
            "services": {
                name: {
                    "image": img,
                    "command": args,
                    "ports": [f"{port}:8000"],
                    "ipc": "host",
                    "environment": {"VLLM_API_KEY": "${VLLM_API_KEY:?set an API key}"},
                    "deploy": {
                        "resources": {
                            "reservations": {
                                "devices": [{"driver": "nvidia", "count": gpus, "capabilities": ["gpu"]}]
                            }
                        }
                    },
                }
            }
        }
    else:
        doc = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "labels": {"app": name}},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {
                        "containers": [
                            {
                                "name": name,
                                "image": img,
                                "args": args,
                                "ports": [{"containerPort": 8000, "name": "http"}],
                                "readinessProbe": {
                                    "httpGet": {"path": "/health", "port": 8000},
                                    "periodSeconds": 10,
                                },
                                "resources": {"limits": {"nvidia.com/gpu": gpus}},
                            }
                        ]
                    },
                },
            },
        }
    return header + yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, width=1000)


def dumps_json(obj: Any) -> str:
    """JSON for CLI output: datetimes as ISO strings, non-finite floats as null."""

    def clean(v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, dict):
            return {str(k): clean(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [clean(x) for x in v]
        if isinstance(v, datetime):
            return v.isoformat()
        return v

    return json.dumps(clean(obj), indent=2)


# ---------------------------------------------------------------- the speculative verdict


def equivalence_of(base: TrialResult, candidate: TrialResult) -> Equivalence | None:
    """The candidate's greedy outputs against the base's (None when either was not recorded, or the
    base's failed: nothing to judge by)."""
    if base.reference is None or candidate.reference is None or not base.reference.ok:
        return None
    if len(base.reference.token_ids) != len(candidate.reference.token_ids):
        return None
    return compare_outputs(base.reference.token_ids, candidate.reference.token_ids)


def profile_of(trial: TrialResult, base: TrialResult | None = None) -> Profile:
    """What the verdict needs of one COMPLETE trial (see ``analysis.verdict``). With ``base`` (the
    tuned baseline), a speculative trial's output equivalence is judged against it."""
    eq = equivalence_of(base, trial) if base is not None and (trial.config or {}).get("speculative") else None
    return Profile(
        equivalent=None if eq is None else eq.equivalent,
        equivalence_note="" if eq is None else eq.describe(),
        key=trial.key,
        study=trial.study,
        number=trial.number,
        role=trial.role,
        config=trial.config,
        argv=trial.deployable_argv,
        levels={lv.concurrency: lv.as_dict() for lv in trial.levels},
        windows=trial.windows,
    )


def verdict_of(results: StudyResults, *, confidence: float = 0.95) -> Verdict:
    """The speculative verdict and deployment policy of a study's feasible COMPLETE trials, ranked by
    its first objective's metric. The tuned baseline is the staged study's re-measured ``tuned``
    trial when it completed, else the best non-speculative trial."""
    if not results.objectives:
        raise NovaError(f"study {results.study_name!r} has no objectives: nothing to rank a verdict by")
    primary = results.objectives[0]
    done = results.feasible()  # an infeasible trial is neither the baseline nor deployable
    try:
        levels = sorted(int(c) for c in (results.spec or {})["sweep"]["concurrency"])
    except (KeyError, TypeError, ValueError):
        levels = sorted({lv.concurrency for t in done for lv in t.levels})
    tuned = next((t.key for t in done if t.role == "tuned"), None)
    if tuned is None:
        plain = [profile_of(t) for t in done if not (t.config or {}).get("speculative")]
        chosen = choose_tuned(plain, primary.metric, primary.maximize)
        tuned = chosen.key if chosen else None
    base = next((t for t in done if t.key == tuned), None)
    return build_verdict(
        [profile_of(t, base) for t in done],
        metric=primary.metric,
        higher_is_better=primary.maximize,
        levels=levels,
        tuned=tuned,
        confidence=confidence,
    )


def policy(study_name: str, storage_url: str) -> Verdict:
    """``verdict_of(load_results(...))``: what ``nova-search policy`` prints."""
    return verdict_of(load_results(study_name, storage_url))
