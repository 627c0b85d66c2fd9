"""The one place nova reads Optuna's private handles: a study's storage and id, a trial's id, the
study's per-thread cache of its trials (dropped, or read as the per-ask snapshot), and a sampler's lazy
random states.

Optuna keeps ``Study._storage``, ``Study._study_id``, ``FrozenTrial._trial_id``,
``Study._thread_local`` / ``Study._get_trials(use_cache=True)`` and ``LazyRandomState`` private, yet its
storage API (heartbeats, system attributes, state changes) is keyed by them and its samplers read them.
Every module outside ``db/`` goes through these functions, so that an Optuna release that renames them
breaks one file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Container

    import numpy
    import optuna
    from optuna.storages import BaseStorage
    from optuna.trial import FrozenTrial, TrialState


def storage_of(study: optuna.Study) -> BaseStorage:
    """The storage a study talks to (Optuna's cache layer where it has one)."""
    return study._storage


def backend_of(study: optuna.Study) -> BaseStorage:
    """The storage under Optuna's cache layer (the RDBStorage itself), or the storage when none."""
    return getattr(study._storage, "_backend", study._storage)


def study_id(study: optuna.Study) -> int:
    """The study's id in its storage."""
    return study._study_id


def trial_id(trial: optuna.Trial | FrozenTrial) -> int:
    """The trial's id in its storage (a live trial's or a frozen one's)."""
    return trial._trial_id


def forget_trials_cache(study: optuna.Study) -> None:
    """Drop the study's per-thread cache of its trials, as ``Study.ask`` does before it samples: the
    sampler then reads every trial afresh."""
    study._thread_local.cached_all_trials = None


def cached_trials(study: optuna.Study, states: Container[TrialState] | None = None) -> list[FrozenTrial]:
    """The study's trials (in ``states``) from Optuna's per-ask snapshot (``Study._get_trials`` with its
    cache, as Optuna's samplers read it), not a read of the database; not copied."""
    return study._get_trials(deepcopy=False, states=states, use_cache=True)


def rng_of(value: object) -> numpy.random.RandomState | None:
    """The random state behind a sampler's attribute when it is one of Optuna's lazy random states
    (``LazyRandomState``, a private class), else None."""
    from optuna.samplers._lazy_random_state import LazyRandomState

    return value.rng if isinstance(value, LazyRandomState) else None
