"""The samplers replayed: nova's (what a worker runs), the variants tuned on the training split, and
the baselines.

- ``nova``: ``search.sampler.make_sampler`` for ``sampler.name: tpe`` (what a worker runs), given the
  table's host facts as a worker gives its own (``use_facts``): its rule check refuses what the
  table's host refuses (fp8 KV cache on a CPU without AVX-512), not only what the spec alone decides;
- ``nova_before``: nova's sampler as it was before issue 55 (``variant("local=false norules")``: no
  steps from the best, no rule check);
- ``optuna_default``: ``TPESampler(seed=...)``, Optuna's defaults (10 random start-up trials,
  independent sampling);
- ``random``: Optuna's ``RandomSampler``, replayed (the results table quotes random search's exact
  figures instead, ``baselines``; this one checks them);
- ``gp``: nova's sampler around Optuna's ``GPSampler``, where PyTorch and SciPy are installed (neither
  is a dependency of nova);
- ``variant(text)``: nova's TPE with other settings (``tune``).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from collections.abc import Callable
from typing import Any

import optuna

from benchmarks.sampler_eval.tables import Table
from nova_search.search.refusals import RuleCheck
from nova_search.search.sampler import TpeSettings, make_sampler, nova_tpe, use_facts

#: a sampler for a table and a seed; None with an order: the configurations in that order
Factory = Callable[[Table, int], tuple[optuna.samplers.BaseSampler | None, list[dict[str, Any]] | None]]


def nova(table: Table, seed: int) -> tuple[optuna.samplers.BaseSampler, None]:
    spec = table.spec
    return _on_host(
        make_sampler(spec.model_copy(update={"sampler": spec.sampler.model_copy(update={"seed": seed})})),
        table,
    ), None


def _on_host(sampler: optuna.samplers.BaseSampler, table: Table) -> optuna.samplers.BaseSampler:
    """The sampler as a worker on the table's host runs it: given the host's facts (``use_facts``,
    as ``worker.loop`` does), so that its rule check refuses what the table's host refuses."""
    if table.facts is not None:
        use_facts(sampler, table.facts)
    return sampler


def plain_random(table: Table, seed: int) -> tuple[optuna.samplers.BaseSampler, None]:
    return optuna.samplers.RandomSampler(seed=seed), None


def optuna_default(table: Table, seed: int) -> tuple[optuna.samplers.BaseSampler, None]:
    return optuna.samplers.TPESampler(seed=seed), None


def gp(table: Table, seed: int) -> tuple[optuna.samplers.BaseSampler, None]:
    spec = table.spec
    gp_spec = spec.model_copy(
        update={"sampler": spec.sampler.model_copy(update={"name": "gp", "seed": seed})}
    )
    return _on_host(make_sampler(gp_spec), table), None


def registry() -> dict[str, Factory]:
    """Every sampler by name: nova's, nova's before issue 55 (no steps from the best, no rule check),
    the baselines, GP where PyTorch and SciPy are installed."""
    out: dict[str, Factory] = {
        "nova": nova,
        "nova_before": variant("local=false norules"),
        "random": plain_random,
        "optuna_default": optuna_default,
    }
    if all(importlib.util.find_spec(m) is not None for m in ("torch", "scipy")):
        out["gp"] = gp
    return out


def variant(text: str) -> Factory:
    """nova's TPE with other settings (``search.sampler.TpeSettings``), written ``name=value`` and
    separated by spaces (``n_startup_trials=5 local=false``); ``current`` is the defaults, ``norules``
    leaves out the rule check (``search.refusals``) ``make_sampler`` gives it."""
    fields = {f.name for f in dataclasses.fields(TpeSettings)}
    changes: dict[str, Any] = {}
    rules = True
    for item in text.split():
        if item in ("current", "norules"):
            rules = rules and item != "norules"
            continue
        name, _, value = item.partition("=")
        if name not in fields:
            raise SystemExit(f"--variant: unknown setting {name!r}; valid: {', '.join(sorted(fields))}")
        changes[name] = json.loads(value)
    settings = dataclasses.replace(TpeSettings(), **changes)

    def make(table: Table, seed: int) -> tuple[optuna.samplers.BaseSampler, None]:
        return nova_tpe(seed, settings, RuleCheck(table.spec, table.facts) if rules else None), None

    return make
