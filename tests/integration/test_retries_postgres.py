"""Dead and stopped workers on a real PostgreSQL with the stand-in engine (issue 40, finding 8:
failure reasons and retries): a trial whose worker is killed, then whose retry's worker is killed too,
is retried again (0 trials lost); a stale trial's FAIL says why; a worker resumed after SIGSTOP, whose
trial was failed meanwhile, says so in one line, no traceback; a trial asked by a worker whose clock
is behind is not taken for an orphan (the cutoffs are not the workers' clocks)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState
from sqlalchemy import create_engine, text

from nova_search import schema
from nova_search.db import count_toward_budget, open_storage
from nova_search.db.heartbeat import fail_orphans
from nova_search.search import lifecycle as nova_study
from nova_search.testing.fault_table import note
from nova_search.testing.pg import fresh_database, read_trials
from nova_search.testing.specs import fake_spec
from nova_search.testing.workers import fake_engines, finish, wait_until, worker

pytestmark = [pytest.mark.postgres, pytest.mark.faults]  # fault injection at full size: --all

FAST_HEARTBEATS = {"NOVA_HEARTBEAT_INTERVAL": "1", "NOVA_GRACE_PERIOD": "3"}
#: a trial of the stand-in that lasts several seconds (16 requests of 16 tokens at 50 ms a token)
SLOW = {"FAKE_ENGINE_ITL_S": "0.05"}


def _kill_when_measuring(url: str, tmp_path: Path) -> None:
    """Start a worker, SIGKILL it once its engine is up, wait until its engine is gone."""
    victim = worker(url, tmp_path, "dist", **SLOW, **FAST_HEARTBEATS)
    try:
        wait_until(lambda: len(fake_engines()) >= 1, 60, "the victim's engine")
        time.sleep(1.0)
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(timeout=10)
    finally:
        if victim.poll() is None:
            victim.kill()
    wait_until(lambda: fake_engines() == [], 30, "the victim's engine torn down")


def test_a_retry_killed_again_is_retried_again_and_the_stale_failures_say_why(tmp_path: Path):
    budget = 2
    with fresh_database() as url:
        nova_study.create(fake_spec(budget), url, "dist")
        _kill_when_measuring(url, tmp_path)  # trial 0, killed
        time.sleep(4)  # past the grace period: the next worker fails it and runs its retry
        _kill_when_measuring(url, tmp_path)  # the retry, killed too
        time.sleep(4)
        survivor = worker(url, tmp_path, "dist", **FAST_HEARTBEATS)
        (out,), hung = finish([survivor], 180)
        trials = read_trials(url, "dist")
        states = [t.state for t in trials]
        complete = [t for t in trials if t.state == TrialState.COMPLETE]
        note(
            "retries",
            "a trial killed, then its retry killed again, budget 2",
            lost=budget - len(complete),
            hung=hung,
        )
        assert survivor.returncode == 0, out[-3000:]
        assert TrialState.RUNNING not in states
        assert len(complete) == budget, [(t.number, t.state, t.system_attrs) for t in trials]  # 0 lost
        assert count_toward_budget(trials) == budget
        failed = [t for t in trials if t.state == TrialState.FAIL]
        assert len(failed) == 2
        for t in failed:
            assert schema.REASON.read(t.user_attrs) == "stale"
            message = schema.MESSAGE.read(t.user_attrs) or ""
            assert "heartbeat stale for" in message and "presumed dead" in message, message
        assert "Traceback" not in out
    assert fake_engines() == []


def test_a_worker_resumed_after_sigstop_says_its_trial_was_failed_meanwhile(tmp_path: Path):
    with fresh_database() as url:
        nova_study.create(fake_spec(1), url, "dist")
        stopped = worker(url, tmp_path, "dist", **SLOW, **FAST_HEARTBEATS)
        other = None
        try:
            wait_until(lambda: len(fake_engines()) >= 1, 60, "the first worker's engine")
            time.sleep(1.0)
            os.kill(stopped.pid, signal.SIGSTOP)
            other = worker(url, tmp_path, "dist", **FAST_HEARTBEATS)
            out_other = other.communicate(timeout=180)[0]  # fails the stale trial, runs its retry
            assert other.returncode == 0, out_other[-3000:]
        finally:
            os.kill(stopped.pid, signal.SIGCONT)
        out = stopped.communicate(timeout=180)[0]
        assert "Traceback" not in out and "UpdateFinishedTrialError" not in out, out[-3000:]
        assert "was failed by another worker" in out, out[-3000:]
        trials = read_trials(url, "dist")
        assert [t.state for t in trials].count(TrialState.COMPLETE) == 1
        assert TrialState.RUNNING not in [t.state for t in trials]
    wait_until(lambda: fake_engines() == [], 30, "no engine left")


def test_a_trial_asked_by_a_worker_whose_clock_is_behind_is_not_an_orphan_at_once():
    """The asking worker's clock is an hour behind (its trial's datetime_start says so): the trial
    has not beaten yet, but it was asked a moment ago, so another worker must not fail it."""
    with fresh_database() as url:
        study = nova_study.create(fake_spec(2), url, "dist")
        storage = open_storage(url, heartbeat_interval=1, grace_period=3)
        trial = study.ask()
        engine = create_engine(url)
        with engine.begin() as conn:
            conn.execute(
                text(
                    "UPDATE trials SET datetime_start = datetime_start - interval '1 hour' "
                    "WHERE trial_id = :i"
                ),
                {"i": trial._trial_id},
            )
        engine.dispose()
        loaded = optuna.load_study(study_name="dist", storage=storage)
        assert fail_orphans(loaded, storage) == []
        assert loaded.get_trials()[0].state == TrialState.RUNNING
        time.sleep(3.5)  # seen without a heartbeat for longer than the grace period: an orphan now
        assert fail_orphans(loaded, storage) == [trial.number]
