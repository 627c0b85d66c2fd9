"""Faults for the fault-injection suite and the storm benchmark: a connection storm on PostgreSQL
(every backend of one database terminated, again and again), and a summary of how a study came out
of it (trial states, internal failures, the budget)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import psycopg
from optuna.trial import TrialState
from sqlalchemy.engine import make_url

from nova_search import schema
from nova_search.db import count_toward_budget
from nova_search.testing.pg import read_trials


def _admin(url: str) -> psycopg.Connection:
    u = make_url(url)
    return psycopg.connect(
        host=u.host or "127.0.0.1",
        port=u.port or 5432,
        user=u.username,
        password=u.password,
        dbname="postgres",
        autocommit=True,
        connect_timeout=5,
    )


@dataclass
class Storm:
    """Terminates every backend connected to ``url``'s database every ``every_s`` seconds, from a
    thread, until stopped (or ``for_s`` seconds have passed). Counts what it killed."""

    url: str
    every_s: float = 0.25
    for_s: float | None = None
    killed: int = 0
    rounds: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> Storm:
        self._thread = threading.Thread(target=self._run, daemon=True, name="storm")
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        database = make_url(self.url).database
        deadline = None if self.for_s is None else time.monotonic() + self.for_s
        with _admin(self.url) as conn:
            while not self._stop.wait(self.every_s):
                if deadline is not None and time.monotonic() > deadline:
                    return
                rows = conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = %s AND pid <> pg_backend_pid()",
                    (database,),
                ).fetchall()
                self.killed += sum(1 for (ok,) in rows if ok)
                self.rounds += 1


@dataclass(frozen=True)
class Outcome:
    """How a study came out: trial states, internal failures, the budget used."""

    states: dict[str, int]
    internal: list[tuple[int, str]]
    budget_used: int
    total: int
    #: every FAIL trial: (number, reason, message), so a failed assertion says what failed
    failed: list[tuple[int, str, str]] = field(default_factory=list)

    @property
    def running(self) -> int:
        return self.states.get("RUNNING", 0)


def outcome(url: str, study_name: str) -> Outcome:
    trials = read_trials(url, study_name)
    states = Counter(t.state.name for t in trials)
    internal = [
        (t.number, t.user_attrs.get(schema.MESSAGE.key, ""))
        for t in trials
        if t.user_attrs.get(schema.REASON.key) == "internal"
    ]
    failed = [
        (
            t.number,
            t.user_attrs.get(schema.REASON.key, ""),
            str(t.user_attrs.get(schema.MESSAGE.key, ""))[:300],
        )
        for t in trials
        if t.state == TrialState.FAIL
    ]
    return Outcome(dict(states), internal, count_toward_budget(trials), len(trials), failed)


def finished(url: str, study_name: str, budget: int) -> bool:
    """Every trial of the budget is finished (none RUNNING or WAITING)."""
    try:
        trials = read_trials(url, study_name)
    except Exception:  # noqa: BLE001 - the database may be mid-storm
        return False
    done = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
    return count_toward_budget(trials) >= budget and all(t.state in done for t in trials)
