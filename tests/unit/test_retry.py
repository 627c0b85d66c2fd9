"""``db.retrying`` on tenacity: which errors are retried, the backoff and its window, the one warning
per outage, and the final one-line error; on a fake clock, so the waits are exact (the jitter is
switched off except in the test of the jitter). A connection refused for good (bad password, no such
database or role) is not retried; nothing pooled is kept across a wait."""

from __future__ import annotations

import logging
import time

import optuna
import pytest
from sqlalchemy.exc import IntegrityError, OperationalError

from nova_search.db import retry, retrying, storage_error
from nova_search.errors import StorageError


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Every wait ``retrying`` makes, in order; the clock moves by the wait and nothing sleeps."""
    monkeypatch.setattr(retry, "_spread", lambda s: s)
    now = [1000.0]
    waits: list[float] = []

    def sleep(s: float) -> None:
        waits.append(s)
        now[0] += s

    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    monkeypatch.setattr(time, "sleep", sleep)
    return waits


def lost() -> OperationalError:
    return OperationalError("SELECT 1", {}, Exception("connection refused"))


def test_the_backoff_doubles_from_a_quarter_second_to_five_and_ends_with_the_window(clock):
    calls = {"n": 0}

    def down() -> None:
        calls["n"] += 1
        raise lost()

    with pytest.raises(StorageError) as e:
        retrying(down, 30, "read x", url="postgresql://nova:secret@db/x")
    assert clock == [0.25, 0.5, 1, 2, 4, 5, 5, 5, 5, 2.25]  # the last wait stops at the window's end
    assert calls["n"] == 11
    assert str(e.value) == (
        "cannot read x postgresql://nova:***@db/x after 11 attempts over 30 s: OperationalError "
        "(is the server up, the URL right?)"
    )
    assert e.value.transient and e.value.__suppress_context__


def test_one_warning_per_outage_naming_the_window(clock, caplog):
    calls = {"n": 0}

    def back_after_four() -> str:
        calls["n"] += 1
        if calls["n"] <= 4:
            raise lost()
        return "ok"

    with caplog.at_level(logging.WARNING, logger="nova_search"):
        assert retrying(back_after_four, 60, "ask for a trial in") == "ok"
    assert [r.getMessage() for r in caplog.records] == [
        "cannot ask for a trial in the storage (OperationalError); "
        "retrying for up to 60 s (NOVA_STORAGE_RETRY_S)"
    ]
    assert clock == [0.25, 0.5, 1, 2]


def test_no_window_means_one_attempt_no_warning_and_no_attempt_count(clock, caplog):
    def down() -> None:
        raise lost()

    with caplog.at_level(logging.WARNING, logger="nova_search"), pytest.raises(StorageError) as e:
        retrying(down, 0, "read x")
    assert str(e.value) == "cannot read x the storage: OperationalError (is the server up, the URL right?)"
    assert clock == [] and caplog.records == []


def test_what_is_not_transient_passes_through_at_once_unchanged(clock):
    refused = optuna.exceptions.StorageInternalError("commit failed")
    refused.__cause__ = IntegrityError("INSERT", {}, Exception("duplicate key"))
    final = StorageError("cannot read x: bad")  # a StorageError not made of a lost connection
    for error in (ValueError("not a storage error"), refused, final):
        calls = {"n": 0}

        def fails(error: BaseException = error, calls: dict[str, int] = calls) -> None:
            calls["n"] += 1
            raise error

        with pytest.raises(type(error)) as e:
            retrying(fails, 10, "read x")
        assert e.value is error and calls["n"] == 1
    assert clock == []


def test_a_transient_storage_error_is_retried(clock):
    calls = {"n": 0}

    def wrapped_then_ok() -> str:
        calls["n"] += 1
        if calls["n"] == 1:
            raise storage_error("sqlite://", "read x", lost())
        return "ok"

    assert retrying(wrapped_then_ok, 10, "read x") == "ok" and clock == [0.25]


def test_fatal_turns_an_error_into_a_final_one_that_is_not_retried(clock):
    seen: list[BaseException] = []
    missing = StorageError("cannot write x: nova's tables are missing (run `nova-search db upgrade`)")
    missing.transient = True  # even one marked transient: fatal's answer is final

    def fatal(e: BaseException) -> StorageError | None:
        seen.append(e)
        return missing if "no such table" in str(e) else None

    calls = {"n": 0}

    def no_table() -> None:
        calls["n"] += 1
        raise OperationalError("INSERT", {}, Exception("no such table: nova_level_result"))

    with pytest.raises(StorageError) as e:
        retrying(no_table, 10, "write x", fatal=fatal)
    assert e.value is missing and e.value.__suppress_context__ and calls["n"] == 1 and clock == []
    # fatal says None: the error is judged as usual (here: transient, retried)
    flaky = {"n": 0}

    def cut_once() -> str:
        flaky["n"] += 1
        if flaky["n"] == 1:
            raise lost()
        return "ok"

    assert retrying(cut_once, 10, "write x", fatal=fatal) == "ok" and clock == [0.25]
    assert len(seen) == 2


def test_waits_are_spread_so_workers_refused_together_come_back_apart(monkeypatch):
    waits: list[float] = []
    monkeypatch.setattr(time, "sleep", waits.append)

    def down() -> None:
        raise lost()

    runs = []
    for _ in range(2):
        waits.clear()
        with pytest.raises(StorageError):
            retrying(down, 0.5, "read x")  # the window ends before the waits reach it
        runs.append(list(waits))
    assert all(0.125 <= w <= 0.25 for w in (runs[0][0], runs[1][0]))
    assert runs[0] != runs[1]


def refused(message: str) -> OperationalError:
    """What SQLAlchemy raises when psycopg's connection is refused with ``message``."""
    return OperationalError(
        None, None, Exception(f'connection to server at "db", port 5432 failed: {message}')
    )


@pytest.mark.parametrize(
    ("message", "said"),
    [
        (
            'FATAL:  password authentication failed for user "nova"',
            'password authentication failed for user "nova"',
        ),
        ('FATAL:  database "novva" does not exist', 'the database "novva" does not exist on the server'),
        ('FATAL:  role "nvoa" does not exist', 'the role "nvoa" does not exist on the server'),
        (
            'FATAL:  no pg_hba.conf entry for host "10.0.0.9", user "nova", database "nova", no encryption',
            "pg_hba.conf lets no connection in from host",
        ),
    ],
)
def test_a_connection_refused_for_good_is_not_retried_and_says_what_is_wrong(clock, message, said):
    calls = {"n": 0}

    def refuse() -> None:
        calls["n"] += 1
        raise optuna.exceptions.StorageInternalError("wrapped") from refused(message)

    with pytest.raises(optuna.exceptions.StorageInternalError) as e:
        retrying(refuse, 300, "open storage", url="postgresql://nova:s3cr3t-pw@db/nova")
    assert calls["n"] == 1 and clock == []
    error = storage_error("postgresql://nova:s3cr3t-pw@db/nova", "open storage", e.value)
    assert said in str(error) and "s3cr3t-pw" not in str(error) and not error.transient


@pytest.mark.parametrize(
    "message",
    [
        "FATAL:  sorry, too many clients already",
        "FATAL:  remaining connection slots are reserved for roles with the SUPERUSER attribute",
        "FATAL:  the database system is starting up",
        "FATAL:  terminating connection due to administrator command",
        "Connection refused",
    ],
)
def test_a_full_or_restarting_server_is_retried(clock, message):
    calls = {"n": 0}

    def full_twice() -> str:
        calls["n"] += 1
        if calls["n"] <= 2:
            raise refused(message)
        return "ok"

    assert retrying(full_twice, 60, "ask for a trial in") == "ok" and clock == [0.25, 0.5]


def test_every_pooled_connection_is_closed_before_each_wait(clock, monkeypatch):
    released: list[int] = []
    monkeypatch.setattr(retry, "release", lambda: released.append(len(clock)))
    calls = {"n": 0}

    def full_twice() -> str:
        calls["n"] += 1
        if calls["n"] <= 2:
            raise refused("FATAL:  sorry, too many clients already")
        return "ok"

    assert retrying(full_twice, 60, "ask for a trial in") == "ok"
    assert released == [0, 1]  # before the first wait, and before the second
