"""Many workers, one study, on a real PostgreSQL. The engine is the fast stand-in
(nova_search/testing/fake_engine.py), launched by nova-search exactly as it launches vLLM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import optuna
import pytest
from optuna.trial import TrialState

from nova_search import schema
from nova_search.db import LevelStore, count_toward_budget
from nova_search.search import lifecycle as nova_study
from nova_search.testing.fault_table import note
from nova_search.testing.pg import fresh_database, own_server, read_trials
from nova_search.testing.specs import fake_spec
from nova_search.testing.workers import fake_engines, finish, wait_until, worker
from tests.support import REPO

pytestmark = pytest.mark.postgres


def test_four_workers_run_exactly_the_budget(tmp_path):
    with fresh_database() as url:
        nova_study.create(fake_spec(12), url, "dist")
        procs = [worker(url, tmp_path) for _ in range(4)]
        outs = [p.communicate(timeout=240)[0] for p in procs]
        assert [p.returncode for p in procs] == [0, 0, 0, 0], "\n".join(o[-1500:] for o in outs)
        trials = read_trials(url, "dist")
        assert len(trials) == 12
        assert sorted(t.number for t in trials) == list(range(12))
        assert all(t.state == TrialState.COMPLETE for t in trials), [t.state for t in trials]
        with LevelStore(url) as store:
            rows = store.rows("dist")
        assert len(rows) == 24  # one row per (trial, level), no duplicates
        assert {(r["trial_number"], r["concurrency"]) for r in rows} == {
            (n, c) for n in range(12) for c in (1, 4)
        }
        assert {r["worker_host"] for r in rows}
    assert fake_engines() == []


def test_killed_worker_trial_fails_over_and_is_retried(tmp_path):
    hb = {"NOVA_HEARTBEAT_INTERVAL": "1", "NOVA_GRACE_PERIOD": "3"}
    with fresh_database() as url:
        nova_study.create(fake_spec(2), url, "dist")
        victim = worker(url, tmp_path, FAKE_ENGINE_CHILD="1", FAKE_ENGINE_ITL_S="0.05", **hb)
        try:
            wait_until(lambda: len(fake_engines()) >= 2, 60, "the trial's engine and its child")
            time.sleep(1.0)
            os.kill(victim.pid, signal.SIGKILL)
            victim.wait(timeout=10)
        finally:
            if victim.poll() is None:
                victim.kill()
        # the guard process tears the whole engine group down, the child included
        wait_until(lambda: fake_engines() == [], 30, "no orphaned engine processes")
        (stale,) = read_trials(url, "dist")
        assert stale.state == TrialState.RUNNING
        time.sleep(4)  # past the grace period
        survivor = worker(url, tmp_path, **hb)
        out = survivor.communicate(timeout=120)[0]
        assert survivor.returncode == 0, out[-2000:]
        trials = read_trials(url, "dist")
        states = [t.state for t in trials]
        assert states.count(TrialState.FAIL) == 1 and states.count(TrialState.COMPLETE) == 2, states
        retry = next(t for t in trials if t.system_attrs.get("failed_trial") is not None)
        assert retry.system_attrs["failed_trial"] == stale.number
        assert retry.state == TrialState.COMPLETE
        assert retry.params == stale.params  # the same configuration, run again
        assert count_toward_budget(trials) == 2
    assert fake_engines() == []


def test_postgres_restart_mid_study_loses_nothing(tmp_path):
    with own_server() as pg:
        nova_study.create(fake_spec(6), pg.url, "dist")
        proc = worker(pg.url, tmp_path, FAKE_ENGINE_ITL_S="0.01")
        try:

            def completed() -> list[optuna.trial.FrozenTrial]:
                try:
                    return read_trials(pg.url, "dist", states=(TrialState.COMPLETE,))
                except Exception:  # noqa: BLE001 - the database may be restarting
                    return []

            wait_until(lambda: len(completed()) >= 2, 120, "two completed trials")
            before = {t.number: t.values for t in completed()}
            pg.restart()
            (out,), hung = finish([proc], 240)
        finally:
            if proc.poll() is None:
                proc.kill()
        trials = read_trials(pg.url, "dist")
        after = {t.number: t.values for t in trials if t.state == TrialState.COMPLETE}
        changed = sum(after.get(number) != values for number, values in before.items())
        note(
            "database faults",
            "PostgreSQL restarted mid-study, budget 6",
            lost=6 - len(after) + changed,
            hung=hung,
        )
        assert proc.returncode == 0, out[-3000:]
        for number, values in before.items():
            assert after[number] == values  # nothing completed before the restart was lost
        assert count_toward_budget(trials) == 6
        assert len(after) == 6, [(t.number, t.state, t.user_attrs.get(schema.MESSAGE.key)) for t in trials]
        with LevelStore(pg.url) as store:
            rows = store.rows("dist")
        assert {r["trial_number"] for r in rows} >= set(after)
    assert fake_engines() == []


def test_surviving_worker_stays_to_run_the_dead_workers_retry(tmp_path):
    """Budget 2, two workers; one is killed mid-trial. The survivor finishes its own trial, sees the
    budget used up by the dead worker's RUNNING trial, and stays until that trial goes stale, fails and
    is re-queued; then it runs the retry itself."""
    hb = {"NOVA_HEARTBEAT_INTERVAL": "1", "NOVA_GRACE_PERIOD": "3"}
    with fresh_database() as url:
        nova_study.create(fake_spec(2), url, "dist")
        victim = worker(url, tmp_path, FAKE_ENGINE_ITL_S="0.05", **hb)
        try:
            wait_until(lambda: len(fake_engines()) >= 1, 60, "the victim's engine")
            survivor = worker(url, tmp_path, **hb)
            time.sleep(1.0)
            os.kill(victim.pid, signal.SIGKILL)
            victim.wait(timeout=10)
            out = survivor.communicate(timeout=180)[0]
        finally:
            for p in (victim,):
                if p.poll() is None:
                    p.kill()
        assert survivor.returncode == 0, out[-2000:]
        trials = read_trials(url, "dist")
        states = [t.state for t in trials]
        assert TrialState.RUNNING not in states, out[-3000:]
        assert states.count(TrialState.FAIL) == 1 and states.count(TrialState.COMPLETE) == 2, states
    assert fake_engines() == []


def test_stop_after_ends_the_slot_between_trials_and_a_later_slot_continues(tmp_path):
    """--stop-after: a worker on a time-slotted machine starts no trial once the time is up, lets the
    running one finish (nothing is cut off), and a later worker continues the same study."""
    with fresh_database() as url:
        nova_study.create(fake_spec(3), url, "dist")

        def slot() -> subprocess.CompletedProcess:
            argv = [
                sys.executable,
                "-m",
                "nova_search",
                "worker",
                "dist",
                "--storage",
                url,
                "--artifacts-dir",
                str(tmp_path / "artifacts"),
                "--stop-after",
                "1",
            ]
            env = {**os.environ, "FAKE_ENGINE_BOOT_S": "1.5"}  # a trial outlasts the 1 s slot
            return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)

        first = slot()
        assert first.returncode == 0, first.stdout[-1500:] + first.stderr[-1500:]
        trials = read_trials(url, "dist")
        assert [t.state for t in trials] == [TrialState.COMPLETE]
        second, third = slot(), slot()
        assert second.returncode == third.returncode == 0
        trials = read_trials(url, "dist")
        assert [t.state for t in trials] == [TrialState.COMPLETE] * 3
    assert fake_engines() == []
