"""Telling a trial's outcome: the tell itself, retried through a database restart (a retried tell whose
first commit landed is fine: ``skip_if_finished``), with SIGINT/SIGTERM deferred so a second signal cannot
cut the recording short (``signals_deferred``); a trial finished elsewhere meanwhile (this worker was
stopped past the grace period) is dropped here in one line (``finished_elsewhere``); a host failure's
trial is queued again (``requeue_trial``); and the reporter is told how the trial ended (``trial_end``,
``report_end``)."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import optuna
from optuna.trial import FrozenTrial, TrialState

from nova_search import schema
from nova_search.db import rdb_storage, retrying, storage_of, trial_id
from nova_search.db.budget import REFUSED_REASON as REFUSED
from nova_search.db.heartbeat import requeue
from nova_search.measure.feasibility import feasible
from nova_search.trial.context import Reporter, TrialEnd

log = logging.getLogger("nova_search")


def tell_outcome(
    study: optuna.Study, trial: optuna.Trial, state: TrialState, values: list[float] | None, window: float
) -> bool:
    """Tell the outcome, through a database restart. A tell whose commit landed but whose answer was
    lost is retried and finds the trial finished: that is success, not an error. Returns False when
    another worker finished the trial between Optuna's own check and the write (its ``skip_if_finished``
    reads, then writes): the outcome here is dropped, as ``finished_elsewhere`` drops it, and said."""

    def once() -> None:
        if state == TrialState.COMPLETE:
            study.tell(trial, values, skip_if_finished=True)
        else:
            study.tell(trial, state=state, skip_if_finished=True)

    try:
        retrying(once, window, "tell a trial's outcome to")
    except optuna.exceptions.UpdateFinishedTrialError:
        finished_elsewhere(study, trial, window)
        return False
    return True


def requeue_trial(study: optuna.Study, trial: optuna.Trial) -> None:
    """Queue the trial again (a host failure's: not counted toward the budget)."""
    requeue(study, rdb_storage(study).get_trial(trial_id(trial)))


def finished_elsewhere(study: optuna.Study, trial: optuna.Trial, window: float) -> bool:
    """Whether another worker finished this trial meanwhile (this one was stopped past the grace
    period: its heartbeat went stale, the trial was failed and re-queued); if so, says it in one line."""
    try:
        frozen = retrying(lambda: rdb_storage(study).get_trial(trial_id(trial)), window, "read a trial in")
    except Exception:  # noqa: BLE001 - the caller goes on as if it were not
        return False
    if not frozen.state.is_finished():
        return False
    reason = schema.REASON.read(frozen.user_attrs) or frozen.state.name
    log.warning(
        "trial %s was failed by another worker while this one was not beating (%s): its result here is "
        "dropped; the trial is queued again if its retries allow",
        trial.number,
        schema.MESSAGE.read(frozen.user_attrs) or reason,
    )
    return True


def trial_end(t: FrozenTrial) -> TrialEnd:
    """How a told trial ended, from what it recorded: its state, values, reason and summary."""
    reason = schema.REASON.read(t.user_attrs)
    message = schema.MESSAGE.read(t.user_attrs)
    summary = schema.SUMMARY.read(t.user_attrs)
    state = t.state.name
    if state == "COMPLETE":
        detail = summary or ", ".join(f"{v:.4g}" for v in t.values or ())
    else:
        detail = f"{reason or 'unknown'}: {message or ''}".rstrip(": ")
    return TrialEnd(
        number=t.number,
        state=state,
        detail=detail,
        values=tuple(t.values) if t.values is not None else None,
        reason=reason,
        feasible=feasible(t),
        launched=reason != REFUSED,
    )


def report_end(study: optuna.Study, trial: optuna.Trial, reporter: Reporter) -> FrozenTrial | None:
    """Tells the reporter how the trial ended (read back as told); returns the told trial."""
    try:
        frozen = storage_of(study).get_trial(trial_id(trial))
    except Exception as e:  # noqa: BLE001 - a report never costs the study
        log.warning("after trial %s: %s: %s", trial.number, type(e).__name__, e)
        return None
    try:
        reporter.trial_finished(trial_end(frozen))
    except Exception as e:  # noqa: BLE001
        log.warning("reporting trial %s: %s: %s", trial.number, type(e).__name__, e)
    return frozen


def best_effort(fn: Callable[[], object]) -> None:
    """Run ``fn``; whatever it raises is dropped (a write that only adds detail to a failed trial)."""
    try:
        fn()
    except Exception:  # noqa: BLE001
        pass


@contextmanager
def signals_deferred() -> Iterator[None]:
    """SIGINT and SIGTERM wait until the block ends (in the main thread; elsewhere a no-op): a second
    Ctrl-C cannot cut short the recording of the first one's outcome. A signal that came meanwhile is
    raised as KeyboardInterrupt afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []

    def note(signum: int, frame: object) -> None:
        pending.append(signum)

    old = {s: signal.signal(s, note) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in old.items():
            # a SIGTERM that came meanwhile stops the worker: like the CLI's own handler after a first
            # one, later SIGTERMs are ignored, so one landing while Python exits cannot kill it by SIGINT
            signal.signal(s, signal.SIG_IGN if s == signal.SIGTERM and s in pending else handler)
    if pending:
        log.warning("a signal came while a trial's outcome was being recorded: it was recorded first")
        raise KeyboardInterrupt
