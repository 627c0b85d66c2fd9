"""LevelResults -> objective values and constraint values. Pure functions.

An objective is a metric, a direction and a level (or "best": the best value over the levels).
A constraint value follows Optuna's convention: feasible when <= 0. ``ttft_p99_ms <= 500`` gives
``ttft_p99_ms - 500``; ``>=`` gives ``bound - value``; ``at every`` takes the worst level.
"""

from __future__ import annotations

from collections.abc import Sequence

from nova_search.metrics import LevelResult
from nova_search.spec import ConstraintSpec, ObjectiveSpec

#: the constraint value for a level where the metric is undefined (nothing completed): infeasible
UNDEFINED_VIOLATION = 1e12


def _metric(level: LevelResult, name: str) -> float | None:
    v = getattr(level, name)
    return None if v is None else float(v)


def objective_value(levels: Sequence[LevelResult], o: ObjectiveSpec) -> float | None:
    if o.at == "best":
        vals = [v for lv in levels if (v := _metric(lv, o.metric)) is not None]
        if not vals:
            return None
        return max(vals) if o.direction == "maximize" else min(vals)
    for lv in levels:
        if lv.concurrency == o.at:
            return _metric(lv, o.metric)
    return None


def objective_values(
    levels: Sequence[LevelResult], objectives: Sequence[ObjectiveSpec]
) -> list[float | None]:
    return [objective_value(levels, o) for o in objectives]


def _violation(value: float | None, c: ConstraintSpec) -> float:
    if value is None:
        return UNDEFINED_VIOLATION
    return value - c.value if c.op == "<=" else c.value - value


def constraint_values(
    levels: Sequence[LevelResult], constraints: Sequence[ConstraintSpec]
) -> dict[str, float]:
    out: dict[str, float] = {}
    for c in constraints:
        chosen = [lv for lv in levels if c.at == "every" or lv.concurrency == c.at]
        if not chosen:
            out[c.name] = UNDEFINED_VIOLATION
            continue
        out[c.name] = max(_violation(_metric(lv, c.metric), c) for lv in chosen)
    return out
