"""Asking a trial within the budget: count, then ask, under the budget lock (``db.StorageLock``), the
first queued trial that fits this worker's slots (``placement.ask_fitting``) or a new one, its
configuration drawn still under the lock (so the next worker's sampler sees it), and its first
heartbeat recorded at once, retried apart (a lost heartbeat write never asks again)."""

from __future__ import annotations

import logging
from collections.abc import Callable

import optuna
from optuna.trial import FrozenTrial

from nova_search.db import (
    StorageLock,
    budget_spent,
    count_refused,
    count_toward_budget,
    rdb_storage,
    retrying,
    trial_id,
)
from nova_search.search.placement import ask_fitting
from nova_search.trial.context import Reporter

log = logging.getLogger("nova_search")

#: whether a queued trial fits this worker's slots
Fits = Callable[[FrozenTrial], bool]
#: draws a trial's configuration (its suggestions stored on the trial)
Draw = Callable[[optuna.Trial], object]


def ask_within_budget(
    study: optuna.Study,
    lock: StorageLock,
    budget: int,
    window: float = 0.0,
    fits: Fits | None = None,
    reporter: Reporter | None = None,
    draw: Draw | None = None,
) -> optuna.Trial | None:
    """Count, then ask (and ``draw``), under the lock; the trial's first heartbeat is recorded at once.
    Each is retried on its own (for ``window`` seconds): a heartbeat write cut by the network must not ask
    again and leave the first trial an orphan. A configuration refused before launch is not counted
    (``db.budget``), up to ``refused_limit(budget)`` of them."""
    trial = retrying(
        lambda: _ask_locked(study, lock, budget, fits, reporter, draw), window, "ask for a trial in"
    )
    if trial is not None:
        storage = rdb_storage(study)
        retrying(lambda: storage.record_heartbeat(trial_id(trial)), window, "record a heartbeat in")
    return trial


def _ask_locked(
    study: optuna.Study,
    lock: StorageLock,
    budget: int,
    fits: Fits | None = None,
    reporter: Reporter | None = None,
    draw: Draw | None = None,
) -> optuna.Trial | None:
    """Count, then ask, under the lock: the first queued trial that ``fits`` this worker, else a new
    one; then ``draw`` its configuration, still under the lock, so that the next worker's sampler sees
    it (no two workers started together draw the same one). A draw that fails is left to the trial
    (``trial.run`` draws again: suggestions are stored, a second draw returns the first's values)."""
    # A spent budget stays spent (a trial counts once it is asked, a retry with the trial it re-runs),
    # so it is seen without the lock: at the end of a fleet's study every worker would otherwise queue
    # for the lock once more only to learn it (200 workers: about 90 s of serial sections)
    if _spent(study.get_trials(deepcopy=False), budget):
        return None
    with lock:
        trials = study.get_trials(deepcopy=False)
        if _spent(trials, budget):
            return None
        trial = study.ask() if fits is None else ask_fitting(study, fits)
        # its first beat before the draw: the draw's writes queue behind a busy database (seconds under
        # load), and a trial RUNNING without a beat past the grace period is failed as an orphan by
        # any other worker (``db.heartbeat.fail_orphans``). Once, here; ``ask_within_budget`` retries it
        _beat_once(study, trial)
        if draw is not None:
            try:
                draw(trial)
            except Exception as e:  # noqa: BLE001 - the trial draws again; the ask must not be repeated
                log.warning(
                    "trial %s: its configuration could not be drawn under the budget lock (%s: %s); it is "
                    "drawn when the trial starts, where another worker may draw the same one",
                    trial.number,
                    type(e).__name__,
                    e,
                )
    if reporter is not None:
        reporter.budget(count_toward_budget(trials) + 1, budget, count_refused(trials))
    return trial


def _beat_once(study: optuna.Study, trial: optuna.Trial) -> None:
    try:
        rdb_storage(study).record_heartbeat(trial_id(trial))
    except Exception as e:  # noqa: BLE001 - recorded again, retried, once the lock is released
        log.debug(
            "trial %s: its first heartbeat under the lock failed (%s); retried after it", trial.number, e
        )


def _spent(trials: list[FrozenTrial], budget: int) -> bool:
    if not budget_spent(trials, budget):
        return False
    if count_toward_budget(trials) < budget:
        log.warning(
            "%d configurations were refused by the compatibility table before launch (the limit "
            "for a budget of %d): no new trial is drawn; narrow the search space",
            count_refused(trials),
            budget,
        )
    return True
