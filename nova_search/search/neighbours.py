"""Configurations as nova's sampler compares them (``search.sampler``): whether one repeats a trial, how
far apart two are and the configurations one step from a trial (the trials no other dominates:
``results.select.pareto_front``). Pure functions of parameters, distributions and Optuna's frozen trials."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import FrozenTrial

from nova_search.search.ordinal import ordered_choices


def repeats(params: Mapping[str, Any], trials: Sequence[FrozenTrial]) -> FrozenTrial | None:
    """The first trial whose parameters all take the same value in ``params``, None if there is none."""
    for t in trials:
        if t.params and all(k in params and params[k] == v for k, v in t.params.items()):
            return t
    return None


def distance(a: Mapping[str, Any], b: Mapping[str, Any], dists: Mapping[str, BaseDistribution]) -> float:
    """How far apart two configurations are: per parameter, a number's difference over its range (of
    its logarithm on a log scale; a list of numbers by rank), else 1 when the values differ; a
    parameter one side lacks counts 1."""
    total = 0.0
    for name, d in dists.items():
        if name not in a or name not in b:
            total += 1.0
            continue
        ranks = ordered_choices(d)
        if ranks is not None:
            total += abs(ranks.index(a[name]) - ranks.index(b[name])) / (len(ranks) - 1)
        elif isinstance(d, IntDistribution | FloatDistribution) and d.high > d.low:
            f = math.log if d.log else float
            total += abs(f(a[name]) - f(b[name])) / (f(d.high) - f(d.low))
        else:
            total += float(a[name] != b[name])
    return total


def steps(
    centre: Mapping[str, Any], at: Mapping[str, Any], dists: Mapping[str, BaseDistribution]
) -> list[dict[str, Any]]:
    """The configurations one step from ``at``: one parameter drawn from a list moved to the next
    number up or down (a list of numbers, by rank) or to another choice (any other list), the others
    as in ``centre`` (``at``'s values, with a range's value wherever ``centre`` has it)."""
    out = []
    for name, d in dists.items():
        if name not in at or not isinstance(d, CategoricalDistribution):
            continue
        ranks = ordered_choices(d)
        if ranks is not None:
            i = ranks.index(at[name])
            values: list[Any] = [ranks[j] for j in (i - 1, i + 1) if 0 <= j < len(ranks)]
        else:
            values = [c for c in d.choices if c != at[name]]
        out += [{**centre, name: v} for v in values]
    return out
