"""The one place nova reads Optuna's private handles: a study's storage and id, a trial's id.

Optuna keeps ``Study._storage``, ``Study._study_id`` and ``FrozenTrial._trial_id`` private, yet its
storage API (heartbeats, system attributes, state changes) is keyed by them. Every module outside
``db/`` goes through these functions, so that an Optuna release that renames them breaks one file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import optuna
    from optuna.storages import BaseStorage
    from optuna.trial import FrozenTrial


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
