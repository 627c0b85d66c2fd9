"""Trial heartbeats, and the recovery of the trials of dead workers, in the storage layer.

Optuna records heartbeats only inside ``study.optimize``; nova's worker runs its own ask/tell
(``worker.loop``), so it beats itself: ``Heartbeat`` records a running trial's heartbeat on a thread.

Two kinds of trials are recovered, each by any worker before it asks:

- **stale** (``fail_stale``): a RUNNING trial whose last heartbeat is older than the grace period, by
  the database's clock (Optuna records each beat with the database's ``now()`` and nova reads
  ``now()`` from the same database, so the workers' clocks never enter). Its FAIL says why
  (reason ``stale``, "heartbeat stale for N s: worker HOST/pid PID presumed dead"), and it is
  re-queued with the same parameters up to ``STALE_RETRIES`` times in a row (see there).
- **orphans** (``fail_orphans``): a RUNNING trial that never recorded a heartbeat: its worker died
  between the ask and the first beat, or an ask whose answer was lost was asked again. Its start
  time is the asking worker's clock, which may be off, so it is not used: a trial is an orphan once
  *this* process has seen it RUNNING without a heartbeat for longer than the grace period (its own
  monotonic clock). Re-queued every time (``requeue``), since it never ran.

A retry carries ``failed_trial`` (``schema.RETRY_OF``: the number of the trial it re-runs, the
immediate one, so ``db.count_toward_budget`` counts each chain of retries once) and Optuna's
``retry_history``. Which trials ever beat is read from Optuna's heartbeat table through its own
model (``beating``).
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Collection
from datetime import datetime

import optuna
from optuna.storages import RDBStorage
from optuna.storages._rdb.models import TrialHeartbeatModel, TrialModel
from optuna.trial import FrozenTrial, TrialState
from sqlalchemy import func, select

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


#: how many times in a row a trial whose worker died (its heartbeat went stale) is run again. A worker
#: is killed by things outside the configuration (a preempted node, an evicted pod, the OOM killer on
#: a busy host, a deploy that restarts the workers), and each kill without a retry loses a trial of
#: the budget; Optuna's RetryFailedTrialCallback(max_retry=1) lost 1 of 16 in a kill run. Three: a
#: configuration whose trial kills its worker every time (say, one that drives the host out of
#: memory) is then given up after 4 runs, and counts once, rather than stopping the study forever.
STALE_RETRIES = 3
#: the system attribute (beside Optuna's retry_history) counting the stale runs of a chain of retries
STALE_RUNS = "stale_runs"


def grace_s(storage: RDBStorage) -> int:
    assert storage.heartbeat_interval
    return storage.grace_period or 2 * storage.heartbeat_interval


def stale_heartbeats(storage: RDBStorage, study_id: int, grace: float) -> list[tuple[int, float]]:
    """(trial id, seconds since its last heartbeat) of the study's RUNNING trials whose heartbeat is
    older than ``grace``, both times the database's (the beat is written with its ``now()``)."""
    query = (
        select(TrialModel.trial_id, TrialHeartbeatModel.heartbeat, func.now())
        .join(TrialHeartbeatModel, TrialHeartbeatModel.trial_id == TrialModel.trial_id)
        .where(TrialModel.study_id == study_id, TrialModel.state == TrialState.RUNNING)
    )
    out = []
    with storage.engine.connect() as conn:
        for trial_id, beat, now in conn.execute(query):
            now = _naive(now)
            age = (now - _naive(beat)).total_seconds()
            if age > grace:
                out.append((int(trial_id), age))
    return out


def _naive(t: datetime | str) -> datetime:
    # SQLite returns CURRENT_TIMESTAMP as text; PostgreSQL's now() is aware, the column naive (as Optuna)
    if isinstance(t, str):
        t = datetime.fromisoformat(t)
    return t.replace(tzinfo=None)


def fail_stale(study: optuna.Study, storage: RDBStorage) -> list[int]:
    """Fail every RUNNING trial of the study whose heartbeat is stale, with the reason, and re-queue it
    (up to ``STALE_RETRIES`` times in a row). Returns the numbers of the trials this call failed."""
    if not storage.heartbeat_interval:
        return []
    grace = grace_s(storage)
    failed = []
    for trial_id, age in stale_heartbeats(storage, study._study_id, grace):
        t = storage.get_trial(trial_id)
        tag = schema.WORKER.read(t.user_attrs)
        who = f"{tag.host}/pid {tag.pid}" if tag is not None else "(not recorded)"
        message = f"heartbeat stale for {age:.0f} s (grace period {grace} s): worker {who} presumed dead"
        try:  # before the state: a finished trial takes no attribute
            storage.set_trial_user_attr(trial_id, schema.REASON.key, "stale")
            storage.set_trial_user_attr(trial_id, schema.MESSAGE.key, message)
            storage.set_trial_user_attr(trial_id, schema.SUMMARY.key, f"stale: {message}")
            if not storage.set_trial_state_values(trial_id, state=TrialState.FAIL):
                continue
        except optuna.exceptions.UpdateFinishedTrialError:
            continue  # another worker failed it first (or its own worker told it meanwhile)
        failed.append(t.number)
        runs = t.system_attrs.get(STALE_RUNS, 0)
        runs = runs if isinstance(runs, int) else 0
        if runs < STALE_RETRIES:
            log.warning(
                "trial %s failed: %s; queued again (retry %d of %d)",
                t.number,
                message,
                runs + 1,
                STALE_RETRIES,
            )
            requeue(study, storage.get_trial(trial_id), {STALE_RUNS: runs + 1})
        else:
            log.warning(
                "trial %s failed: %s; not queued again: its worker died %d times in a row on it",
                t.number,
                message,
                runs + 1,
            )
    return failed


#: (storage url, trial id) -> when this process first saw the trial RUNNING without a heartbeat
_unbeaten_since: dict[tuple[str, int], float] = {}
_unbeaten_lock = threading.Lock()


def fail_orphans(study: optuna.Study, storage: RDBStorage) -> list[int]:
    """Fail (and re-queue) every RUNNING trial that never recorded a heartbeat and that this process
    has seen so for longer than the grace period: it was asked by a worker that died before its first
    beat, or by an ask whose answer was lost and was asked again. Returns their numbers."""
    if not storage.heartbeat_interval:
        return []
    grace = grace_s(storage)
    now = time.monotonic()
    running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    ids = {t._trial_id: t for t in running}
    beats = beating(storage, ids) if ids else set()
    failed = []
    with _unbeaten_lock:
        for key in [k for k in _unbeaten_since if k[0] == str(storage.url) and k[1] not in ids]:
            del _unbeaten_since[key]
        old = []
        for trial_id, t in ids.items():
            key = (str(storage.url), trial_id)
            if trial_id in beats:
                _unbeaten_since.pop(key, None)
            elif now - _unbeaten_since.setdefault(key, now) > grace:
                old.append(t)
    # asked again just before failing them: under load the first read can be seconds old by now, and a
    # trial that began beating meanwhile is running, not orphaned
    late = beating(storage, [t._trial_id for t in old]) if old else set()
    for t in old:
        if t._trial_id in late:
            continue
        if storage.set_trial_state_values(t._trial_id, state=TrialState.FAIL):
            failed.append(t.number)
            log.warning("trial %s was asked but never heartbeated: failed after %s s", t.number, grace)
            requeue(study, storage.get_trial(t._trial_id))
    return failed


def requeue_orphan(study: optuna.Study, t: FrozenTrial) -> None:
    """An orphan's retry (``requeue``); kept for callers of the old name."""
    requeue(study, t)


def requeue(study: optuna.Study, t: FrozenTrial, extra: dict[str, object] | None = None) -> None:
    """Queue a failed trial again (its params, if it was a retry, and its attributes), marked as its
    retry so that the failed trial does not count toward the budget. Not Optuna's
    RetryFailedTrialCallback: it keeps the first failed trial as ``failed_trial``, so a retry that
    fails again would still count toward the budget (``db.count_toward_budget``)."""
    attrs: dict[str, object] = {**copy.deepcopy(t.system_attrs)}
    attrs.pop(STALE_RUNS, None)
    attrs.update(extra or {})
    history = attrs.get("retry_history")
    attrs["retry_history"] = [*(history if isinstance(history, list) else []), t.number]
    attrs[schema.RETRY_OF] = t.number
    study.add_trial(
        optuna.create_trial(
            state=TrialState.WAITING,
            params=t.params,
            distributions=t.distributions,
            user_attrs={k: v for k, v in t.user_attrs.items() if k not in _OUTCOME_KEYS},
            system_attrs=attrs,
        )
    )


#: what a failed run recorded about its end: not carried into its retry
_OUTCOME_KEYS = frozenset({schema.REASON.key, schema.MESSAGE.key, schema.SUMMARY.key})
