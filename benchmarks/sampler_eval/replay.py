"""One sampler on one table for one seed, as a worker draws: each trial's configuration comes from
``search.configs.sample`` (the worker's own code) and the sampler under test; the table answers.

A configuration the table marks as not launchable (refused by nova's rules, or a boot that fails) is
told as a worker tells it: PRUNED, constraint ``launchable`` = 1. The rest COMPLETE with the table's
figure (the mean of its passes), and under an SLO with the constraint's violation, as nova tells a
missed condition. A replay stops at the first feasible configuration within 5 % of the table's best,
noting on the way the first within 10 %; a seed that never gets there within ``cap`` trials counts
``cap + 1``.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import optuna

from benchmarks.sampler_eval.tables import Table, key, stage_base
from nova_search.analysis.noise import median_ci
from nova_search.search.configs import sample
from nova_search.trial.failure import UNLAUNCHABLE_CONSTRAINT

#: the name the SLO's violation is told under (a spec's condition, as a worker stores it)
SLO_CONSTRAINT = "slo"
#: the coverage of a median's interval over the seeds (``summarize``'s ``ci_5``)
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Run:
    """One replay: trials to within 5 % and 10 % of the best (``cap + 1``: not within ``cap``)."""

    within_5: int
    within_10: int
    refused: int
    repeats: int

    def found(self, cap: int) -> bool:
        return self.within_5 <= cap


def replay(
    table: Table,
    sampler: optuna.samplers.BaseSampler | None,
    cap: int,
    order: Sequence[dict[str, Any]] | None = None,
) -> Run:
    """Trials until the first configuration within 5 % of ``table``'s best; with ``order``, the
    configurations are taken in that order instead (enqueued, as a grid or a shuffle)."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    spec = table.spec
    base = stage_base(spec, table.stage)
    study = optuna.create_study(
        direction=table.direction, sampler=sampler or optuna.samplers.RandomSampler(0)
    )
    seen: set[str] = set()
    refused = repeats = 0
    hit_10: int | None = None
    for n in range(1, cap + 1):
        if order is not None:
            if n > len(order):
                break
            study.enqueue_trial(order[n - 1])
        trial = study.ask()
        config = sample(trial, spec, table.stage, base)
        k = key(trial.params)
        repeats += k in seen
        seen.add(k)
        entry = table.evaluate(trial.params, config, trial.distributions)
        if not entry.launchable:
            refused += 1
            trial.set_constraint(UNLAUNCHABLE_CONSTRAINT, 1.0)
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            continue
        trial.set_constraint(UNLAUNCHABLE_CONSTRAINT, 0.0)
        feasible = True
        if entry.constraint is not None:
            trial.set_constraint(SLO_CONSTRAINT, entry.constraint)
            feasible = entry.constraint <= 0
        study.tell(trial, entry.value)
        if feasible and hit_10 is None and table.good(entry.value, 0.10):
            hit_10 = n
        if feasible and table.good(entry.value, 0.05):
            return Run(n, hit_10 or n, refused, repeats)
    return Run(cap + 1, hit_10 or cap + 1, refused, repeats)


def quartiles(values: Sequence[float]) -> tuple[float, float, float]:
    """(25th percentile, median, 75th percentile), as ``statistics.quantiles`` cuts them (inclusive)."""
    if len(values) == 1:
        return values[0], values[0], values[0]
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q2, q3


def summarize(runs: Sequence[Run], cap: int) -> dict[str, Any]:
    """The figures of one sampler on one table over its seeds; ``ci_5`` is a 95 % interval of the
    median trials to within 5 % (distribution-free: ``analysis.noise.median_ci``, the order statistics
    nova's verdicts use for a level's windows), how far the seeds pin that median down."""
    q5 = quartiles([r.within_5 for r in runs])
    q10 = quartiles([r.within_10 for r in runs])
    ci = median_ci([r.within_5 for r in runs], CONFIDENCE)
    return {
        "median_5": q5[1],
        "iqr_5": [q5[0], q5[2]],
        "ci_5": [ci.low, ci.high],
        "median_10": q10[1],
        "iqr_10": [q10[0], q10[2]],
        "not_found": sum(not r.found(cap) for r in runs),
        "median_refused": statistics.median(r.refused for r in runs),
        "median_repeats": statistics.median(r.repeats for r in runs),
        #: the first seeds' counts, for a replay to check (the spread is in the quartiles)
        "first_seeds_5": [r.within_5 for r in runs[:4]],
    }
