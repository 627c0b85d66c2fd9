"""Trial heartbeats and the recovery of trials that never beat, in the storage layer.

Optuna records heartbeats only inside ``study.optimize``; nova's worker runs its own ask/tell
(``worker.loop``), so it beats itself: ``Heartbeat`` records a running trial's heartbeat on a thread.
Optuna's ``fail_stale_trials`` fails a trial whose heartbeat went stale; a trial that was asked but
never beat (its worker died in between, or an ask whose answer was lost was asked again) is failed
here by ``fail_orphans`` once the grace period is past, and re-queued every time (``requeue_orphan``).
Which trials ever beat is read from Optuna's heartbeat table through its own model (``beating``).
"""

from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Collection
from datetime import datetime, timedelta

import optuna
from optuna.storages import RDBStorage
from optuna.storages._rdb.models import TrialHeartbeatModel
from optuna.trial import FrozenTrial, TrialState
from sqlalchemy import select

from nova_search import schema

log = logging.getLogger("nova_search")


class Heartbeat:
    """Records the trial's heartbeat while it runs; a missed beat (database away) is retried next time."""

    def __init__(self, storage: RDBStorage, trial_id: int, interval: float) -> None:
        self.storage, self.trial_id, self.interval = storage, trial_id, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"heartbeat-{trial_id}")

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while True:
            try:
                self.storage.record_heartbeat(self.trial_id)
            except Exception as e:  # noqa: BLE001 - a missed beat is retried on the next tick
                log.warning("heartbeat of trial %s missed: %s", self.trial_id, type(e).__name__)
            if self._stop.wait(self.interval):
                return


def beating(storage: RDBStorage, trial_ids: Collection[int]) -> set[int]:
    """Which of ``trial_ids`` have recorded a heartbeat (a row in Optuna's heartbeat table)."""
    query = select(TrialHeartbeatModel.trial_id).where(TrialHeartbeatModel.trial_id.in_(list(trial_ids)))
    with storage.engine.connect() as conn:
        return {int(r[0]) for r in conn.execute(query)}


def fail_orphans(study: optuna.Study, storage: RDBStorage) -> list[int]:
    """Fail (and re-queue once, as a stale trial is) every RUNNING trial that never recorded a
    heartbeat and started more than the grace period ago: it was asked by a worker that died before
    its first beat, or by an ask whose answer was lost and was asked again. Returns their numbers."""
    if not storage.heartbeat_interval:
        return []
    grace = storage.grace_period or 2 * storage.heartbeat_interval
    cutoff = datetime.now() - timedelta(seconds=grace)
    running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    old = {t._trial_id: t for t in running if t.datetime_start is not None and t.datetime_start < cutoff}
    if not old:
        return []
    beats = beating(storage, old)
    failed = []
    for trial_id, t in old.items():
        if trial_id in beats:
            continue
        if storage.set_trial_state_values(trial_id, state=TrialState.FAIL):
            failed.append(t.number)
            log.warning("trial %s was asked but never heartbeated: failed after %s s", t.number, grace)
            requeue_orphan(study, storage.get_trial(trial_id))
    return failed


def requeue_orphan(study: optuna.Study, t: FrozenTrial) -> None:
    """Queue an orphan's trial again (its params, if it was a retry, and its attributes), marked as its
    retry so that the orphan does not count toward the budget. Unlike a stale trial (re-queued once),
    an orphan is re-queued every time: it never ran (no heartbeat: no server, no measurement), so a
    retry that is orphaned again by another lost answer is not a trial the budget loses. Not Optuna's
    RetryFailedTrialCallback(max_retry=None): it keeps the first failed trial as ``failed_trial``, so
    an orphaned retry would still count toward the budget (``db.count_toward_budget``)."""
    attrs: dict[str, object] = {**copy.deepcopy(t.system_attrs)}
    history = attrs.get("retry_history")
    attrs["retry_history"] = [*(history if isinstance(history, list) else []), t.number]
    attrs[schema.RETRY_OF] = t.number
    study.add_trial(
        optuna.create_trial(
            state=TrialState.WAITING,
            params=t.params,
            distributions=t.distributions,
            user_attrs=t.user_attrs,
            system_attrs=attrs,
        )
    )
