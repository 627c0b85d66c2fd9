"""An additive model of one objective over the configurations measured so far (``search.sampler``'s
steps from the best): each knob's effect learned apart from the others, ridge-shrunk towards none.

Serving figures move with the knobs mostly one knob at a time (a cache dtype costs what it costs at
any batch, a larger token budget helps at any dtype), so a model that adds one effect per knob value
is learned from a handful of trials, where a model of the whole configuration is not. A value no
trial has measured gets no effect of its own (the shrinkage's zero): it ranks above the values
measured worse than the others, below those measured better. Pure functions of Optuna's trials.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import FrozenTrial

#: the ridge penalty, in units of the standardised objective
RIDGE = 1.0


def _features(space: Mapping[str, BaseDistribution]) -> Callable[[Mapping[str, Any]], np.ndarray]:
    """A configuration as numbers: one indicator per list value, a range's position in its range."""
    columns: list[tuple[str, Any]] = []
    for name, d in sorted(space.items()):
        if isinstance(d, CategoricalDistribution):
            columns += [(name, ("is", json_key(c))) for c in d.choices]
        elif isinstance(d, IntDistribution | FloatDistribution) and d.high > d.low:
            columns.append((name, ("at", None)))

    def encode(params: Mapping[str, Any]) -> np.ndarray:
        row = np.zeros(len(columns))
        for i, (name, (kind, value)) in enumerate(columns):
            if name not in params:
                continue
            if kind == "is":
                row[i] = float(json_key(params[name]) == value)
            else:
                d = space[name]
                f = math.log if d.log else float  # type: ignore[union-attr]
                lo, hi = f(d.low), f(d.high)  # type: ignore[union-attr]
                row[i] = (f(params[name]) - lo) / (hi - lo) - 0.5
        return row

    return encode


def json_key(value: Any) -> str:
    return repr((type(value).__name__, value))


def additive(
    trials: Sequence[FrozenTrial], maximize: bool, space: Mapping[str, BaseDistribution]
) -> Callable[[Mapping[str, Any]], float] | None:
    """The model's prediction (higher is better, whatever the direction) from ``trials``' first
    values; None with fewer than two trials. Positive figures are modelled on a log scale (effects
    that multiply), others as they are."""
    done = [t for t in trials if t.values]
    if len(done) < 2:
        return None
    y = np.array([t.values[0] for t in done], dtype=float)
    if np.all(y > 0):
        y = np.log(y)
    if not maximize:
        y = -y
    scale = float(np.std(y)) or 1.0
    centre = float(np.mean(y))
    encode = _features(space)
    x = np.array([encode(t.params) for t in done])
    z = (y - centre) / scale
    coef = np.linalg.solve(x.T @ x + RIDGE * np.eye(x.shape[1]), x.T @ z)

    def predict(params: Mapping[str, Any]) -> float:
        return float(encode(params) @ coef)

    return predict
