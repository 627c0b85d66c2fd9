"""Choosing between trials: one definition each of the objective value, the ranking, the Pareto
front, the best trials, the stock baseline and the tuned baseline. Every reader uses these: ``best``,
``export``, ``policy``, ``report``, the dashboard notes, ``status`` and the Python API.

- ``objective_of(trial, o)``: Optuna's stored value for an objective of the study, else
  ``objectives.objective_value`` over the trial's levels (and its capacity figures).
- ``ranked(trials, o)``: best first by ``o``, ties to the lower trial number; trials without a value
  for ``o`` are left out.
- ``direction_of(d)``: an Optuna study direction as nova names it (``maximize``, ``minimize``).
- ``pareto_front(trials, directions)``: Optuna's own front (``Study.best_trials``, the front of a
  study's own trials) over any trials: a staged study's stages together, the trials meeting
  ``--where``.
- ``best_trials(results, objective=, where=)``: feasible COMPLETE trials meeting every condition;
  with an objective the single best by it, else the Pareto front sorted by the first objective.
- ``tuned_baseline(results)``: the best feasible non-speculative trial by the study's first objective
  (at its ``at``); stock counts, so when nothing beat stock, stock is the tuned configuration. In a
  staged study whose speculative stage re-measured that configuration beside the candidates (the
  ``tuned`` trial), that re-measurement is the baseline: every speculative gain is quoted against it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Protocol, TypeVar

import optuna
from optuna.trial import TrialState, create_trial

from nova_search.measure.objectives import (
    Condition,
    Direction,
    Objective,
    objective_value,
    parse_condition,
    parse_objective,
)
from nova_search.results.trials import StudyResults, TrialResult


class _Valued(Protocol):
    """Anything with a trial's objective values: a ``TrialResult``, an Optuna ``FrozenTrial``."""

    @property
    def values(self) -> Sequence[float] | None: ...


_T = TypeVar("_T", bound=_Valued)


def objective_of(trial: TrialResult, o: Objective) -> float | None:
    """The trial's value of ``o``: the stored value for an objective of the study, else computed."""
    if o.index is not None:
        if trial.values is None or o.index >= len(trial.values):
            return None
        return trial.values[o.index]
    return objective_value(trial.levels, o, trial.figures)


def ranked(trials: Iterable[TrialResult], o: Objective) -> list[TrialResult]:
    """``trials`` that have a value of ``o``, best first (ties: the lower number, then the key)."""
    scored = [(v, t) for t in trials if (v := objective_of(t, o)) is not None and math.isfinite(v)]
    scored.sort(key=lambda vt: (-vt[0] if o.maximize else vt[0], vt[1].number, vt[1].key))
    return [t for _, t in scored]


def direction_of(d: optuna.study.StudyDirection) -> Direction:
    """nova's name for an Optuna study direction."""
    return "maximize" if d == optuna.study.StudyDirection.MAXIMIZE else "minimize"


def _defined(values: Sequence[float], directions: Sequence[Direction]) -> list[float]:
    """``values`` with an undefined (NaN) one made the worst of its objective."""
    worst = {"maximize": -math.inf, "minimize": math.inf}
    return [worst[d] if math.isnan(v) else v for v, d in zip(values, directions, strict=True)]


def pareto_front(trials: Iterable[_T], directions: Sequence[Direction]) -> list[_T]:
    """The trials no other one dominates (by their objective values), in their given order; equal
    trials are all on it. Any trials with ``values`` (``TrialResult``, Optuna's ``FrozenTrial``: nova's
    sampler steps from this front). Optuna's definition, computed by Optuna: the trials' values in a scratch
    in-memory study, whose ``best_trials`` (public API) is the front. An undefined (NaN) value, which
    Optuna never stores (it fails such a trial) but a hand-made result may hold, counts as the worst."""
    pool = [t for t in trials if t.values is not None and len(t.values) == len(directions)]
    if not pool or not directions:
        return pool  # nothing to compare by: no trial dominates another
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.ERROR)  # no "A new study created in memory" line
    try:
        scratch = optuna.create_study(directions=list(directions))
    finally:
        optuna.logging.set_verbosity(verbosity)
    # no constraints are set: every trial is feasible to Optuna (the caller chose the pool)
    scratch.add_trials(
        [create_trial(values=_defined(t.values or (), directions), state=TrialState.COMPLETE) for t in pool]
    )
    on_front = {f.number for f in scratch.best_trials}  # numbered 0.. in the pool's order
    return [t for i, t in enumerate(pool) if i in on_front]


def resolve(results: StudyResults, objective: str | Objective) -> Objective:
    """An objective by name (``output_throughput@best``, ``ttft_p99_ms@32``) in this study's terms."""
    return objective if isinstance(objective, Objective) else parse_objective(objective, results.objectives)


def best_trials(
    results: StudyResults,
    *,
    objective: str | Objective | None = None,
    where: Sequence[Condition | str] = (),
) -> list[TrialResult]:
    """The best feasible COMPLETE trials that meet every condition in ``where``: with ``objective``,
    a one-element list (the best by it) or empty; without, the Pareto front (over the candidates),
    sorted best first by the first objective."""
    conditions = [parse_condition(c) for c in where]
    candidates = [t for t in results.feasible() if all(c.holds(t.levels, t.figures) for c in conditions)]
    if objective is not None:
        top = ranked(candidates, resolve(results, objective))
        return top[:1]
    if conditions:
        front = pareto_front(candidates, results.directions)
    else:
        front = [t for t in candidates if results.on_front(t)]
    if not results.objectives:
        return front
    order = {t.key: i for i, t in enumerate(ranked(front, results.objectives[0]))}
    return sorted(front, key=lambda t: (order.get(t.key, len(order)), t.number))


def top_trial(results: StudyResults) -> TrialResult | None:
    """The best feasible COMPLETE trial by the study's first objective, None when there is none."""
    if not results.objectives:
        return None
    found = best_trials(results, objective=results.objectives[0])
    return found[0] if found else None


def stock_trial(results: StudyResults) -> TrialResult | None:
    """The COMPLETE stock baseline, None when there is none (or it did not complete)."""
    t = results.stock()
    return t if t is not None and t.state == "COMPLETE" else None


def tuned_baseline(results: StudyResults) -> TrialResult | None:
    """The tuned baseline (see the module docstring); None without a feasible non-speculative trial."""
    plain = [t for t in results.feasible() if not t.speculative and t.config is not None]
    remeasured = [t for t in plain if t.role == "tuned"]
    if remeasured:
        return remeasured[0]
    if not results.objectives:
        return None
    top = ranked(plain, results.objectives[0])
    return top[0] if top else None


def ranked_plain(results: StudyResults) -> list[TrialResult]:
    """The feasible non-speculative trials, the tuned baseline first, then best first by the first
    objective (what the report and the dashboard draw as "tuned" and its runners-up)."""
    base = tuned_baseline(results)
    if base is None or not results.objectives:
        return [base] if base else []
    rest = [t for t in results.feasible() if not t.speculative and t.config is not None and t.key != base.key]
    return [base, *ranked(rest, results.objectives[0])]
