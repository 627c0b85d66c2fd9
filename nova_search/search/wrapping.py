"""A sampler around another (``WrappedSampler``: what it does not change goes to the ``base``), and each
trial's draws seeded from the study's seed and the trial's number (``PerTrialSeed``, ``trial_seed``):
workers that share a seed draw apart, and one worker's draws are the same run after run (issue 40).
``sampler.NovaSampler`` and ``sampler.FittingSampler`` are such wrappers."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import optuna
from optuna.distributions import BaseDistribution
from optuna.trial import FrozenTrial, TrialState

from nova_search.db import rng_of


class WrappedSampler(optuna.samplers.BaseSampler):
    """A sampler around another (``base``): everything it does not change goes to the base. Subclasses
    change the sampling methods (``NovaSampler`` here, ``FittingSampler``)."""

    def __init__(self, base: optuna.samplers.BaseSampler) -> None:
        self.base = base

    def infer_relative_search_space(
        self, study: optuna.Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        return self.base.infer_relative_search_space(study, trial)

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        return self.base.sample_relative(study, trial, search_space)

    def sample_independent(
        self, study: optuna.Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution
    ) -> Any:
        return self.base.sample_independent(study, trial, param_name, param_distribution)

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self.base.before_trial(study, trial)

    def after_trial(
        self,
        study: optuna.Study,
        trial: FrozenTrial,
        state: TrialState,
        values: Sequence[float] | None,
    ) -> None:
        self.base.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self.base.reseed_rng()


class PerTrialSeed(WrappedSampler):
    """The study's sampler with each trial's draws seeded from ``seed`` and the trial's number
    (``trial_seed``): workers that share a seed draw apart, and one worker's draws are
    the same run after run. Without a seed (``sampler.seed: null``) the base's own fresh seed is kept."""

    def __init__(self, base: optuna.samplers.BaseSampler, seed: int | None = None) -> None:
        super().__init__(base)
        self.seed = seed

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        if self.seed is not None:
            reseed(self.base, trial_seed(self.seed, trial.number))
        super().before_trial(study, trial)


def trial_seed(seed: int, number: int) -> int:
    """The seed of one trial's draws: from the study's seed and the trial's number (unique across
    workers), so that workers sharing a seed draw apart and one worker's draws are reproducible."""
    digest = hashlib.sha256(f"{seed}:{number}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def reseed(sampler: object, seed: int, _depth: int = 0) -> None:
    """Seed every random state of an Optuna sampler (and of the samplers it holds) with ``seed``."""
    if _depth > 3:
        return
    for value in vars(sampler).values():
        rng = rng_of(value)
        if rng is not None:
            rng.seed(seed)
        elif isinstance(value, optuna.samplers.BaseSampler):
            reseed(value, seed, _depth + 1)
