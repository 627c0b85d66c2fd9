"""Random search's figures without seed noise, the reference nova is measured against.

Random search draws each trial independently, every parameter's values equally likely (Optuna's
``RandomSampler`` through ``search.configs.sample``), so the trials it needs to reach a configuration
within 5 % of the best are geometric: with ``p`` the chance one draw lands there, the t-th quantile
is the least ``n`` with ``1 - (1 - p) ** n >= t``. ``p`` is exact on a grid (the chances of its
configurations, ``tables.configurations``, that are within 5 % and feasible) and a Monte-Carlo
estimate on a partial table whose space has ranges (``DRAWS`` draws, made as ``RandomSampler``
makes them, each answered by the nearest measured configuration). Random search without repeats is
simulated: ``ORDERS`` seeded orders of the grid drawn without replacement, each configuration as
likely as ``RandomSampler`` makes it; on a space with ranges it is random search itself (a repeat is
then a chance in thousands).

With 40 seeds a replayed random search's median moves by a trial or more on a small table (a 12-seed
replay gave 3.5 where the geometric median is 8): the geometric figures take that noise out of the
reference.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.distributions import CategoricalDistribution

from benchmarks.sampler_eval.tables import Table, configurations, stage_base
from nova_search.search.configs import sample
from nova_search.search.refusals import RandomDraw

#: Monte-Carlo draws of a partial table with ranges
DRAWS = 20000
#: the most configurations listed exactly; past it, Monte Carlo
LISTED = 5000
#: simulated orders of random search without repeats
ORDERS = 4000


@dataclass(frozen=True)
class Reference:
    """Quartiles (25th, median, 75th) of the trials to within 5 % and to within 10 %."""

    within_5: tuple[float, float, float]
    within_10: tuple[float, float, float]
    #: the chance one random draw lands within 5 % (within 10 %)
    chance_5: float
    chance_10: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "median_5": self.within_5[1],
            "iqr_5": [self.within_5[0], self.within_5[2]],
            "median_10": self.within_10[1],
            "iqr_10": [self.within_10[0], self.within_10[2]],
            "chance_5": round(self.chance_5, 5),
            "chance_10": round(self.chance_10, 5),
        }


def geometric(p: float) -> tuple[float, float, float]:
    """The quartiles of the trials to the first success, each trial succeeding with chance ``p``."""
    if p <= 0:
        return math.inf, math.inf, math.inf
    if p >= 1:
        return 1.0, 1.0, 1.0

    def quantile(t: float) -> float:
        return float(max(1, math.ceil(math.log(1 - t) / math.log(1 - p) - 1e-12)))

    return quantile(0.25), quantile(0.5), quantile(0.75)


def _hits(table: Table, within: float) -> list[tuple[bool, float]]:
    """(within ``within`` of the best and feasible, its chance) of every configuration of a grid."""
    out = []
    for params, config, weight in configurations(table.spec, table.stage):
        if len(out) >= LISTED:
            raise ValueError("too many configurations to list: Monte Carlo")
        entry = table.evaluate(params, config, _dists(params, table))
        good = entry.launchable and (entry.constraint or 0.0) <= 0 and table.good(entry.value, within)
        out.append((good, weight))
    return out


def _dists(params: dict[str, Any], table: Table) -> dict[str, Any]:
    """Distributions of a listed configuration for ``Table.evaluate`` (a partial table that lists)."""
    return {k: CategoricalDistribution([v]) for k, v in params.items()}


def reference(table: Table) -> tuple[Reference, Reference]:
    """(random search, random search without repeats) on ``table``."""
    try:
        listed = {w: _hits(table, w) for w in (0.05, 0.10)}
    except ValueError:  # a float range or a long one: Monte Carlo, and no repeats to speak of
        listed = None
    if listed is None:
        rng = optuna.samplers.RandomSampler(seed=0)
        base = stage_base(table.spec, table.stage)
        counts = {0.05: 0, 0.10: 0}
        for _ in range(DRAWS):
            draw = RandomDraw(rng)
            config = sample(draw, table.spec, table.stage, base)
            entry = table.evaluate(draw.params, config, draw.distributions)
            for w in counts:
                counts[w] += entry.launchable and table.good(entry.value, w) and (entry.constraint or 0) <= 0
        p5, p10 = counts[0.05] / DRAWS, counts[0.10] / DRAWS
        plain = Reference(geometric(p5), geometric(p10), p5, p10)
        return plain, plain
    p5 = sum(w for good, w in listed[0.05] if good)
    p10 = sum(w for good, w in listed[0.10] if good)
    plain = Reference(geometric(p5), geometric(p10), p5, p10)
    return plain, Reference(_orders(listed[0.05]), _orders(listed[0.10]), p5, p10)


def _orders(hits: list[tuple[bool, float]]) -> tuple[float, float, float]:
    """Quartiles of the first success over ``ORDERS`` weighted orders without replacement."""
    rng = random.Random("nova-no-repeat")
    firsts = []
    for _ in range(ORDERS):
        # Efraimidis and Spirakis: each item's key u ** (1 / weight), largest first
        keyed = sorted(((rng.random() ** (1.0 / w), good) for good, w in hits), reverse=True)
        firsts.append(next((i + 1 for i, (_, good) in enumerate(keyed) if good), len(keyed) + 1))
    firsts.sort()
    n = len(firsts)
    return float(firsts[n // 4]), float(firsts[n // 2]), float(firsts[(3 * n) // 4])
