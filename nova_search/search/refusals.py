"""What nova's sampler knows before a launch (``search.sampler``): whether a whole configuration would be
refused by the compatibility rules (``search.rules``), so that it is never proposed.

A configuration the rules refuse is never launched (``trial.run`` ends it PRUNED, apart from the
budget), but a sampler that proposes it has spent a trial of the study on it: a third of the CPU grid
of ``benchmarks/sampler_replay.yaml`` is refused (chunked prefill off with a token budget below
``max_model_len``), and random search spends a third of its trials there. ``RuleCheck`` builds the
configuration a trial's parameters make (``configs.sample`` over a ``FixedTrial``: the worker's own
code) in the stage the study draws (``tune``, ``joint``, or ``speculative`` on top of the study's
tuned base, read once from the study's attributes), and asks the rules. The facts are the worker's
host's (``use_facts``; ``benchmarks/sampler_eval`` gives a replayed sampler its table's host's); without
them (a study made outside a worker) only the rules that read nothing of the host or the model
(``rules.spec_incompatibilities``). A parameter not
drawn yet (one drawn apart, as ``tensor_parallel_size`` is for a worker's slot) leaves the
configuration unknown, and it is not refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution

from nova_search import schema
from nova_search.knobs import EngineConfig
from nova_search.search.configs import sample, with_graph_sizes
from nova_search.search.rules import Facts, incompatibilities, spec_incompatibilities
from nova_search.spec import StudySpec


class RandomDraw:
    """A trial for ``configs.sample`` drawing each parameter as Optuna's ``RandomSampler`` does (its
    values equally likely), recording what it drew and from which distribution."""

    def __init__(self, rng: optuna.samplers.RandomSampler) -> None:
        self.rng = rng
        self.params: dict[str, Any] = {}
        self.distributions: dict[str, BaseDistribution] = {}

    def _draw(self, name: str, d: BaseDistribution) -> Any:
        value = self.rng.sample_independent(None, None, name, d)  # type: ignore[arg-type]
        self.params[name], self.distributions[name] = value, d
        return value

    def suggest_categorical(self, name: str, choices: Any) -> Any:
        return self._draw(name, CategoricalDistribution(choices))

    def suggest_int(self, name: str, low: int, high: int, *, step: int = 1, log: bool = False) -> int:
        return int(self._draw(name, IntDistribution(low, high, step=step, log=log)))

    def suggest_float(self, name: str, low: float, high: float, *, log: bool = False) -> float:
        return float(self._draw(name, FloatDistribution(low, high, log=log)))


class RuleCheck:
    """Whether the rules refuse the configuration a trial's parameters make; see the module docstring."""

    def __init__(self, spec: StudySpec, facts: Facts | None = None) -> None:
        self.spec = spec
        self.facts = facts
        self._stages: dict[str, tuple[str, EngineConfig | None]] = {}

    def _stage(self, study: optuna.Study) -> tuple[str, EngineConfig | None]:
        """The study's stage and tuned base (None outside a speculative stage), read once."""
        name = study.study_name
        if name not in self._stages:
            attrs = study.user_attrs
            base = schema.BASE.read(attrs)
            self._stages[name] = (schema.stage_of(attrs), base.config if base else None)
        return self._stages[name]

    def problems(self, config: EngineConfig) -> list[str]:
        """Why the rules refuse ``config`` (empty: they accept it): every rule with the host's facts,
        the spec's own without them. The one question every other method asks; a subclass that
        knows more refusals (a measured grid's recorded ones) answers it."""
        config = with_graph_sizes(self.spec, config)
        if self.facts is None:
            return spec_incompatibilities(config)
        return incompatibilities(config, self.facts)

    def refuses(self, study: optuna.Study, params: Mapping[str, Any]) -> bool:
        stage, base = self._stage(study)
        try:
            config = sample(optuna.trial.FixedTrial(dict(params)), self.spec, stage, base)
        except ValueError:  # a parameter not drawn yet, or a stage without its base: not known
            return False
        return bool(self.problems(config))

    def draw(
        self, study: optuna.Study, rng: optuna.samplers.RandomSampler, tries: int
    ) -> tuple[dict[str, Any], dict[str, BaseDistribution]] | None:
        """A whole configuration drawn at random that the rules accept (up to ``tries`` draws), with
        its distributions; None when the stage cannot be drawn here or every draw is refused."""
        stage, base = self._stage(study)
        for _ in range(tries):
            trial = RandomDraw(rng)
            try:
                config = sample(trial, self.spec, stage, base)
            except ValueError:
                return None
            if not self.problems(config):
                return trial.params, trial.distributions
        return None
