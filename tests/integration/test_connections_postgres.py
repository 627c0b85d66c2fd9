"""Connections on a small PostgreSQL (issue 40, finding 4): workers give their connections back while
they wait, so more workers than the server has connections for still run their budget; a connection
refused for good (bad password, no such database, no such role) ends the worker at once, exit 5,
naming what is wrong. Each test starts a throwaway server (nova_search/testing/pg_server.py), never the shared
one, whose settings must not change."""

from __future__ import annotations

import threading
import time

import optuna
import psycopg
import pytest
from optuna.trial import TrialState
from sqlalchemy import text
from sqlalchemy.engine import make_url

from nova_search.db import LevelStore, StorageLock, count_toward_budget, open_storage, retrying
from nova_search.db.connections import IDLE_CLOSE_S
from nova_search.search import lifecycle as nova_study
from nova_search.testing.fault_table import note
from nova_search.testing.pg import SHARED
from nova_search.testing.pg_server import throwaway_server
from nova_search.testing.specs import fake_spec
from nova_search.testing.workers import fake_engines, finish, worker

pytestmark = [pytest.mark.postgres, pytest.mark.faults]  # fault injection at full size: --all


def test_four_workers_on_a_server_of_twelve_connections_all_finish_their_budget(tmp_path):
    """Before: each worker kept up to 6 connections (pools of 5 + 10, the lock, the level store) while
    it retried for more: 4 workers on max_connections=12 ran 0 trials in 150 s."""
    with throwaway_server(max_connections=12) as pg:
        url = pg.create_database("nova")
        nova_study.create(fake_spec(8), url, "dist")
        env = {"NOVA_STORAGE_RETRY_S": "120", "NOVA_HEARTBEAT_INTERVAL": "1", "NOVA_GRACE_PERIOD": "10"}
        procs = [worker(url, tmp_path, **env) for _ in range(4)]
        outs, hung = finish(procs, 150)
        trials = optuna.load_study(study_name="dist", storage=url).get_trials()
        complete = sum(t.state == TrialState.COMPLETE for t in trials)
        note("connections", "4 workers on max_connections=12, budget 8", lost=8 - complete, hung=hung)
        assert [p.returncode for p in procs] == [0, 0, 0, 0], "\n".join(o[-1500:] for o in outs)
        assert count_toward_budget(trials) == 8
        assert all(t.state == TrialState.COMPLETE for t in trials), [t.state for t in trials]
        with LevelStore(url) as store:
            assert len(store.rows("dist")) == 16
    assert fake_engines() == []


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ("password", 'password authentication failed for user "postgres"'),
        ("database", 'the database "novva" does not exist on the server'),
        # with password auth the server does not tell a missing role from a wrong password
        ("role", 'password authentication failed for user "nvoa"'),
        ("role, trust auth", 'the role "nvoa" does not exist on the server'),
    ],
)
def test_a_connection_refused_for_good_exits_5_at_once_naming_what_is_wrong(tmp_path, change, said):
    """Before: retried for NOVA_STORAGE_RETRY_S (300 s) as if transient, then 'is the server up?'."""
    with throwaway_server(password="right-pw-0451") as pg:
        url = pg.create_database("nova")
        nova_study.create(fake_spec(2), url, "dist")
        bad = {
            "password": url.replace("right-pw-0451", "wrong-pw-7734"),
            "database": url.rsplit("/", 1)[0] + "/novva",
            "role": url.replace("postgres:right-pw-0451@", "nvoa:right-pw-0451@"),
            "role, trust auth": make_url(SHARED).set(username="nvoa").render_as_string(hide_password=False),
        }[change]
        t0 = time.monotonic()
        proc = worker(bad, tmp_path, NOVA_STORAGE_RETRY_S="300")
        (out,), hung = finish([proc], 60)
        took = time.monotonic() - t0
        note("connections", f"a connection refused for good ({change})", hung=hung + (took >= 15))
        assert proc.returncode == 5, out[-2000:]
        assert took < 15, f"{took:.0f} s: retried as if transient"
        assert said in out
        assert "right-pw-0451" not in out and "wrong-pw-7734" not in out
        assert "Traceback" not in out


@pytest.mark.parametrize("pool", ["0", "2"])
def test_idle_connections_are_closed_and_workers_waiting_for_the_lock_hold_none(monkeypatch, pool):
    """No pool (the default), or a pool of 2 (NOVA_DB_POOL_SIZE): a worker holds no connection once
    it has been idle IDLE_CLOSE_S; 40 workers queueing for the budget lock hold at most the queue's
    places between their tries (a blocking pg_advisory_lock held one each)."""
    monkeypatch.setenv("NOVA_DB_POOL_SIZE", pool)
    with throwaway_server(max_connections=50) as pg:
        url = pg.create_database("nova")
        storage = open_storage(url)
        with psycopg.connect(pg.libpq(), autocommit=True) as monitor:

            def held() -> int:
                q = "SELECT count(*) FROM pg_stat_activity WHERE datname = 'nova'"
                return int(monitor.execute(q).fetchone()[0])

            with storage.engine.connect() as conn:
                conn.execute(text("SELECT 1"))
            time.sleep(IDLE_CLOSE_S * 3)
            assert held() == 0
            holder = StorageLock(storage.engine, "nova-search#budget")
            peak = [0]
            got: list[int] = []

            def wait_for_lock(i: int) -> None:
                def take() -> None:  # as the worker takes it: a full server is retried
                    with StorageLock(storage.engine, "nova-search#budget"):
                        got.append(i)

                retrying(take, 60, "take the budget lock in")

            with holder:
                waiters = [threading.Thread(target=wait_for_lock, args=(i,)) for i in range(40)]
                for t in waiters:
                    t.start()
                time.sleep(1)  # the first tries of all 40 come at once; then they settle
                t_end = time.monotonic() + 3
                while time.monotonic() < t_end:
                    peak[0] = max(peak[0], held())
                    time.sleep(0.05)
            for t in waiters:
                t.join(timeout=60)
            assert sorted(got) == list(range(40))
            # the holder, the 16 queue places, and the tries in flight (a blocking lock: 41)
            assert peak[0] <= 28, f"{peak[0]} connections held while 40 workers waited for the lock"
        storage.engine.dispose()
