"""Feasibility, one definition for the run side (``worker``, ``trial``) and the read side (``results``).

Optuna's convention, as its own ``_get_feasible_trials`` reads it: a constraint holds when its value is
<= 0, and a trial with no constraints is feasible. Over Optuna's records:

- ``holds(values)``: every constraint value of a mapping holds (``objectives.constraint_values``'s, or
  a trial's stored ones);
- ``meets_constraints(t)``: a trial's stored constraints (``FrozenTrial.constraints``, Optuna's reading
  of both stored forms) all hold, whatever its state;
- ``feasible(t)``: a COMPLETE trial that meets its constraints (what the read side calls feasible);
- ``best_feasible(trials, maximize)``: the feasible trial with the best first objective value.

Each caller says which it means: a trial's end reads ``feasible``, a pool already read as COMPLETE may
read ``meets_constraints``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from optuna.trial import FrozenTrial, TrialState


def holds(values: Mapping[str, float]) -> bool:
    """Whether every constraint value holds (<= 0; none at all holds)."""
    return all(v <= 0.0 for v in values.values())


def meets_constraints(t: FrozenTrial) -> bool:
    """Whether the trial's stored constraints all hold, whatever its state."""
    return holds(t.constraints)


def feasible(t: FrozenTrial) -> bool:
    """Whether the trial is COMPLETE and meets every constraint."""
    return t.state == TrialState.COMPLETE and meets_constraints(t)


def better(value: float, than: float, maximize: bool) -> bool:
    """Whether ``value`` is strictly better than ``than`` in the objective's direction."""
    return value > than if maximize else value < than


def best_feasible(trials: Iterable[FrozenTrial], maximize: bool) -> FrozenTrial | None:
    """The feasible trial (``feasible``) with the best first objective value, the first given on a tie;
    trials without values are left out. None when there is none."""
    best = None
    for t in trials:
        if not t.values or not feasible(t):
            continue
        if best is None or better(t.values[0], best.values[0], maximize):
            best = t
    return best
