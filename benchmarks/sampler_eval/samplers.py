"""The samplers replayed: nova's (what a worker runs), the variants tuned on the training split, and
the baselines.

- ``nova``: ``search.sampler.make_sampler`` for ``sampler.name: tpe`` (what a worker runs);
- ``random``: Optuna's ``RandomSampler`` (it may draw a configuration twice);
- ``random_no_repeat``: random search that never draws a configuration twice: every configuration of
  the space in a seeded order drawn without replacement, each as likely as ``RandomSampler`` makes it
  (a drafter's options split its share); where the space has a range too many values to list, plain
  ``RandomSampler`` (a repeat is then a chance in thousands);
- ``optuna_default``: ``TPESampler(seed=...)``, Optuna's defaults (10 random start-up trials,
  independent sampling);
- ``gp``: nova's sampler around Optuna's ``GPSampler``, where PyTorch is installed (it is not a
  dependency of nova).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import random
from collections.abc import Callable
from typing import Any

import optuna

from benchmarks.sampler_eval.tables import Table, configurations
from nova_search.search.sampler import TpeSettings, make_sampler, nova_tpe

#: a sampler for a table and a seed; None with an order: the configurations in that order
Factory = Callable[[Table, int], tuple[optuna.samplers.BaseSampler | None, list[dict[str, Any]] | None]]

#: the most configurations ``random_no_repeat`` lists; past it, plain random
LISTED = 5000


def nova(table: Table, seed: int) -> tuple[optuna.samplers.BaseSampler, None]:
    spec = table.spec
    return make_sampler(
        spec.model_copy(update={"sampler": spec.sampler.model_copy(update={"seed": seed})})
    ), None


def plain_random(table: Table, seed: int) -> tuple[optuna.samplers.BaseSampler, None]:
    return optuna.samplers.RandomSampler(seed=seed), None


def random_no_repeat(table: Table, seed: int) -> tuple[optuna.samplers.BaseSampler | None, Any]:
    weighted = weighted_configurations(table)
    if weighted is None:
        return optuna.samplers.RandomSampler(seed=seed), None
    rng = random.Random(seed)
    # Efraimidis and Spirakis: each configuration's key u ** (1 / weight), largest first, is a draw
    # without replacement in proportion to the weights
    order = sorted(weighted, key=lambda pw: rng.random() ** (1.0 / pw[1]), reverse=True)
    return None, [p for p, _ in order]


def weighted_configurations(table: Table) -> list[tuple[dict[str, Any], float]] | None:
    """Every configuration of the table's space with the chance ``RandomSampler`` draws it, None past
    ``LISTED`` configurations or with a float range."""
    out: list[tuple[dict[str, Any], float]] = []
    try:
        for params, _, weight in configurations(table.spec, table.stage):
            out.append((params, weight))
            if len(out) > LISTED:
                return None
    except ValueError:  # a float range
        return None
    return out


def optuna_default(table: Table, seed: int) -> tuple[optuna.samplers.BaseSampler, None]:
    return optuna.samplers.TPESampler(seed=seed), None


def gp(table: Table, seed: int) -> tuple[optuna.samplers.BaseSampler, None]:
    spec = table.spec
    gp_spec = spec.model_copy(
        update={"sampler": spec.sampler.model_copy(update={"name": "gp", "seed": seed})}
    )
    return make_sampler(gp_spec), None


BASELINES: dict[str, Factory] = {
    "random": plain_random,
    "random_no_repeat": random_no_repeat,
    "optuna_default": optuna_default,
}


def registry() -> dict[str, Factory]:
    """Every sampler by name: nova's, the baselines, GP where PyTorch is installed."""
    out: dict[str, Factory] = {"nova": nova, **BASELINES}
    if importlib.util.find_spec("torch") is not None:
        out["gp"] = gp
    return out


def variant(text: str) -> Factory:
    """nova's TPE with other settings (``search.sampler.TpeSettings``), written ``name=value`` and
    separated by spaces (``n_startup_trials=5 prior_weight=0.5``); ``current`` is the defaults."""
    fields = {f.name: f.type for f in dataclasses.fields(TpeSettings)}
    changes: dict[str, Any] = {}
    for item in text.split():
        if item == "current":
            continue
        name, _, value = item.partition("=")
        if name not in fields:
            raise SystemExit(f"--variant: unknown setting {name!r}; valid: {', '.join(fields)}")
        changes[name] = json.loads(value)
    settings = dataclasses.replace(TpeSettings(), **changes)
    return lambda table, seed: (nova_tpe(seed, settings), None)
