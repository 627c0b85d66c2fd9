"""How the search went, for the report: the hypervolume of the feasible front after each trial, and
Optuna's parameter importances per objective. Pure functions of ``results.StudyResults``.

The hypervolume is Optuna's own (WFG) calculator, ``optuna._hypervolume.compute_hypervolume``: Optuna
has no public one for a point set (``plot_hypervolume_history`` is an experimental figure, for
studies of two objectives or more), so this private import is pinned by pyproject's optuna
``>=5.0,<5.1`` and tests/unit/test_front.py checks it against exact counts in 1 to 4
dimensions, so that an Optuna release that moves or changes it fails there first.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from optuna._hypervolume import compute_hypervolume

from nova_search.measure.objectives import Objective
from nova_search.results.trials import StudyResults

#: importances need at least this many complete trials with parameters
MIN_IMPORTANCE_TRIALS = 2


@dataclass(frozen=True)
class HypervolumePoint:
    #: the trial whose completion this point follows
    trial_number: str
    hypervolume: float


@dataclass(frozen=True)
class Importance:
    objective: str
    #: (parameter, importance), most important first; empty when it could not be computed
    importances: tuple[tuple[str, float], ...]
    note: str = ""


# ---------------------------------------------------------------- hypervolume


def hypervolume(points: Sequence[Sequence[float]], reference: Sequence[float]) -> float:
    """The volume dominated by ``points`` (all objectives minimized) and bounded by ``reference``,
    exact (Optuna's calculator, see the module docstring). Points that do not strictly dominate the
    reference add nothing (Optuna refuses them, so they are left out here)."""
    pts = [tuple(p) for p in points if all(a < r for a, r in zip(p, reference, strict=True))]
    if not pts:
        return 0.0
    return float(compute_hypervolume(np.asarray(pts, dtype=float), np.asarray(reference, dtype=float)))


def _minimized(values: Sequence[float], objectives: Sequence[Objective]) -> tuple[float, ...]:
    return tuple(-v if o.maximize else v for v, o in zip(values, objectives, strict=True))


def hypervolume_history(
    results: StudyResults, margin: float = 0.1
) -> tuple[list[HypervolumePoint], tuple[float, ...] | None]:
    """The hypervolume of the feasible COMPLETE trials after each one completes (in completion
    order). The reference point is the worst value of each objective over those trials, moved
    ``margin`` of the objective's range further (so the extreme points count); it is returned in
    the objectives' own units and directions."""
    objs = results.objectives
    done = [t for t in results.feasible() if t.values is not None and len(t.values) == len(objs)]
    if not objs or not done:
        return [], None
    done.sort(key=lambda t: (t.datetime_complete is None, t.datetime_complete or 0, t.number))
    mins = [_minimized(t.values, objs) for t in done]  # type: ignore[arg-type]
    ref = []
    for i in range(len(objs)):
        col = [m[i] for m in mins]
        span = max(col) - min(col)
        ref.append(max(col) + (margin * span if span > 0 else max(abs(max(col)) * margin, 1e-9)))
    history = [HypervolumePoint(t.key, hypervolume(mins[: i + 1], ref)) for i, t in enumerate(done)]
    reference = tuple(-r if o.maximize else r for r, o in zip(ref, objs, strict=True))
    return history, reference


# ---------------------------------------------------------------- importances


def param_importances(results: StudyResults) -> tuple[list[Importance], str | None]:
    """Optuna's parameter importances per objective over the COMPLETE trials with parameters.
    Returns (importances, note); the note says why there are none or what failed."""
    import optuna
    from optuna.distributions import json_to_distribution
    from optuna.trial import TrialState, create_trial

    objs = results.objectives
    pool = [t for t in results.complete() if t.params and t.values is not None and len(t.values) == len(objs)]
    if len(pool) < MIN_IMPORTANCE_TRIALS:
        return [], (
            f"parameter importances need at least {MIN_IMPORTANCE_TRIALS} COMPLETE trials with searched "
            f"parameters (this study has {len(pool)})"
        )
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.ERROR)  # no "A new study created in memory" line
    try:
        study = optuna.create_study(directions=[o.direction for o in objs])
    finally:
        optuna.logging.set_verbosity(verbosity)
    try:
        for t in pool:
            study.add_trial(
                create_trial(
                    params=t.params,
                    distributions={k: json_to_distribution(v) for k, v in t.distributions.items()},
                    values=list(t.values),  # type: ignore[arg-type]
                    state=TrialState.COMPLETE,
                )
            )
    except Exception as e:  # noqa: BLE001 - a stored trial Optuna cannot re-read: say so, carry on
        return [], f"parameter importances not computed: {type(e).__name__}: {e}"
    out = []
    for i, o in enumerate(objs):
        sign = -1.0 if o.maximize else 1.0  # evaluators that read "low is good" see the better side
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                imp = optuna.importance.get_param_importances(
                    study, target=lambda t, i=i, s=sign: s * t.values[i]
                )
            pairs = tuple((k, float(v)) for k, v in imp.items() if math.isfinite(float(v)))
            out.append(Importance(o.name, pairs, "" if pairs else "no parameter varies enough to rank"))
        except Exception as e:  # noqa: BLE001 - importances are a nicety: note the failure
            out.append(Importance(o.name, (), f"not computed: {type(e).__name__}: {e}"))
    return out, None
