"""Stopping a trial early, after any level of its sweep: Optuna has no multi-objective pruner, so this
is nova's. Pure functions over the levels measured so far and the finished trials of the study.
Its "dominated" is kept hand-written because it is not Pareto dominance over final values (what
Optuna computes, and ``results.select.pareto_front`` uses): it asks for a relative margin at every
level measured so far, on a trial that has not finished.

A trial stops (PRUNED, with the level and the reason) when, after a level:

- **a constraint is already broken**: a condition at ``every`` level fails at a measured level, or a
  condition at concurrency N fails and N is measured. No later level can mend either. (A condition at
  ``best`` can still be met by a later level, so it is never judged early; nor is one on a trial
  figure such as ``capacity_per_gpu``, known only once the capacity search has run.)
- **it is dominated with a margin**: some finished feasible trial was better at *every* level measured
  so far, for *every* objective's metric, by more than ``margin`` (relative) each time. An objective
  at a fixed concurrency that is already measured is compared at that level alone (its value is
  final); one at ``best``, or at a level still to come, is compared at each measured level. This is a
  prediction, not a proof: a profile that loses by a margin at every level so far is taken to lose at
  the rest. ``min_levels`` sets how many levels must be measured before a trial can be judged this way.
  An objective on a trial figure (``capacity_per_gpu``) has no value per level: a trial is never judged
  dominated on it.

The margin stands in for window-to-window noise (``search.early_stop.margin``, 5 % by default): set
it above the spread of repeated windows of one server on your hardware.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from nova_search.measure.metrics import LevelResult
from nova_search.measure.objectives import Condition, ObjectiveLike, level_violation, metric_at

#: the reasons of a trial stopped early (``Stop.reason``)
REASONS = ("constraint", "dominated")


@dataclass(frozen=True)
class Finished:
    """A finished trial of the study, as the rule reads it: its number and levels; only feasible
    COMPLETE trials are passed."""

    number: int
    levels: Sequence[LevelResult]


@dataclass(frozen=True)
class Stop:
    """Why a trial stops after the level at ``concurrency``."""

    concurrency: int
    #: one of REASONS
    reason: str
    message: str
    #: the trial that dominates it (reason "dominated")
    by: int | None = None


def broken_constraint(levels: Sequence[LevelResult], conditions: Sequence[Condition]) -> str | None:
    """The first condition that no later level can mend, with the level that broke it; None if none."""
    for c in conditions:
        if c.at == "best" or c.figure:
            continue
        at_levels = levels if c.at == "every" else [lv for lv in levels if lv.concurrency == c.at]
        for lv in at_levels:
            if level_violation(lv, c) > 0.0:
                value = metric_at((lv,), c.metric, lv.concurrency)
                shown = "undefined" if value is None else f"{value:.4g}"
                return f"{c.name} fails at concurrency {lv.concurrency} ({c.metric} = {shown})"
    return None


def _better(mine: float | None, theirs: float | None, maximize: bool, margin: float) -> bool:
    """Whether ``theirs`` beats ``mine`` by more than ``margin`` (relative to ``mine``)."""
    if mine is None or theirs is None:
        return False
    if maximize:
        return theirs > mine + margin * abs(mine)
    return theirs < mine - margin * abs(mine)


def _compared_levels(levels: Sequence[LevelResult], o: ObjectiveLike) -> list[int]:
    measured = [lv.concurrency for lv in levels]
    if o.at != "best" and int(o.at) in measured:
        return [int(o.at)]
    return measured


def dominates(
    other: Sequence[LevelResult],
    levels: Sequence[LevelResult],
    objectives: Sequence[ObjectiveLike],
    margin: float,
) -> str | None:
    """How ``other`` beats ``levels`` on every objective's metric at every compared level by more than
    ``margin`` (a short text), or None when it does not."""
    parts = []
    for o in objectives:
        maximize = o.direction == "maximize"
        pairs = [
            (c, metric_at(levels, o.metric, c), metric_at(other, o.metric, c))
            for c in _compared_levels(levels, o)
        ]
        if not all(_better(mine, theirs, maximize, margin) for _, mine, theirs in pairs):
            return None
        # the level where it came closest, for the text
        c, mine, theirs = min(pairs, key=lambda p: abs(p[2] - p[1]) / (abs(p[1]) or 1.0))  # type: ignore[operator]
        parts.append(f"{o.metric} {theirs:.4g} vs {mine:.4g} at {c}")
    return "; ".join(parts)


def early_stop(
    levels: Sequence[LevelResult],
    finished: Sequence[Finished],
    objectives: Sequence[ObjectiveLike],
    conditions: Sequence[Condition],
    margin: float,
    min_levels: int,
) -> Stop | None:
    """Whether a trial that has measured ``levels`` (in sweep order) stops now; see the module
    docstring."""
    if not levels:
        return None
    here = levels[-1].concurrency
    broken = broken_constraint(levels, conditions)
    if broken is not None:
        return Stop(here, "constraint", f"stopped after concurrency {here}: {broken}")
    if len(levels) < min_levels:
        return None
    for f in finished:
        how = dominates(f.levels, levels, objectives, margin)
        if how is not None:
            return Stop(
                here,
                "dominated",
                f"stopped after concurrency {here}: trial {f.number} was better by more than "
                f"{margin:.0%} at every level so far, on every objective (closest: {how})",
                by=f.number,
            )
    return None
