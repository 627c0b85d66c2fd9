"""The samplers replayed: nova's (what a worker runs), the variants tuned on the training split, and
the baselines.

- ``nova``: ``search.sampler.make_sampler`` for ``sampler.name: tpe`` (what a worker runs), with the
  rule check of a worker on the table's host (``host_rules``: the host's facts, or a measured grid's
  recorded refusals): it refuses what that host refuses (an fp8 KV cache on a CPU without AVX-512),
  not only what the spec alone decides;
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
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import optuna

from benchmarks.sampler_eval.tables import Table, stage_base
from nova_search.knobs import EngineConfig
from nova_search.search.configs import sample, with_graph_sizes
from nova_search.search.refusals import RuleCheck
from nova_search.search.rules import RULES
from nova_search.search.sampler import TpeSettings, make_sampler, nova_samplers, nova_tpe
from nova_search.spec import StudySpec

#: a sampler for a table and a seed; None with an order: the configurations in that order
Factory = Callable[[Table, int], tuple[optuna.samplers.BaseSampler | None, list[dict[str, Any]] | None]]


def nova(table: Table, seed: int) -> tuple[optuna.samplers.BaseSampler, None]:
    return _on_host(off_host(table, seed)[0], table), None


def off_host(table: Table, seed: int) -> tuple[optuna.samplers.BaseSampler, None]:
    """nova's sampler as a study made outside a worker has it: the spec's own rules only, none of the
    host's (what the replay ran before it gave nova the table's host; the tests compare the two)."""
    spec = table.spec
    return make_sampler(
        spec.model_copy(update={"sampler": spec.sampler.model_copy(update={"seed": seed})})
    ), None


def _on_host(sampler: optuna.samplers.BaseSampler, table: Table) -> optuna.samplers.BaseSampler:
    """The sampler as a worker on the table's host runs it: its rule check refuses what the table's
    host refuses (``host_rules``), as a worker's does once ``worker.loop`` gives it the host's facts."""
    return with_rules(sampler, host_rules(table))


def with_rules(sampler: optuna.samplers.BaseSampler, rules: RuleCheck) -> optuna.samplers.BaseSampler:
    """``sampler`` with nova's sampler inside it (whatever wraps it) asking ``rules`` instead of its own."""
    for nova_sampler in nova_samplers(sampler):
        if nova_sampler.rules is not None:
            nova_sampler.rules = rules
    return sampler


def host_rules(table: Table) -> RuleCheck:
    """The rule check a worker on the table's host has: the host's facts (``Table.host``); for a
    measured grid, which keeps none, the refusals its rows record (``RecordedRules``)."""
    host = table.host
    if host is not None:
        return RuleCheck(table.spec, host)
    return RecordedRules(table.spec, [(e.params, e.reason) for e in table.entries], table.stage)


#: the names the compatibility rules give a refusal (``rules.RULES``: a reason reads ``name: why``)
_RULE_NAMES = frozenset(rule.name for rule in RULES)


class RecordedRules(RuleCheck):
    """The rules of the host a grid was measured on, as its rows recorded them: what the spec's own
    rules refuse, and every configuration the host's rules refused when it was measured (a reason that
    names a rule, such as ``fp8_kv_cache_on_cpu`` on a CPU without AVX-512). ``sampler_replay
    measure`` asked the rules with the host's facts and wrote down their answers, not the facts; a
    worker on that host refuses the same configurations before proposing them. A configuration that
    failed at boot is not among them: no worker knows that before launching it."""

    def __init__(
        self, spec: StudySpec, recorded: Iterable[tuple[Mapping[str, Any], str | None]], stage: str = "tune"
    ) -> None:
        """``recorded``: each configuration's parameters and the reason it did not run (None: it ran)."""
        super().__init__(spec)
        base = stage_base(spec, stage)
        self._refused = {
            with_graph_sizes(spec, sample(optuna.trial.FixedTrial(dict(params)), spec, stage, base))
            for params, reason in recorded
            if (reason or "").split(":", 1)[0].strip() in _RULE_NAMES  # a rule's ``name: why``
        }

    def problems(self, config: EngineConfig) -> list[str]:
        problems = super().problems(config)
        if not problems and with_graph_sizes(self.spec, config) in self._refused:
            return ["refused by the rules of the host the grid was measured on (its rows say so)"]
        return problems


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
        return nova_tpe(seed, settings, host_rules(table) if rules else None), None

    return make
