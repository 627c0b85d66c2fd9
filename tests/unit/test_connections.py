"""The connection policy (db.connections): what each NOVA_DB_POOL_SIZE gives a server's engine, and a
bad value refused naming the variable. Idle connections closed on a real server:
tests/integration/test_connections_postgres.py."""

from __future__ import annotations

import pytest
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from nova_search.db._url import engine_kwargs
from nova_search.db.connections import server_engine_kwargs
from nova_search.errors import InputError

PG = make_url("postgresql+psycopg://nova:pw@db/nova")


def test_the_default_is_no_pool_with_a_connect_timeout_and_no_prepared_statements(monkeypatch):
    monkeypatch.delenv("NOVA_DB_POOL_SIZE", raising=False)
    monkeypatch.delenv("NOVA_STORAGE_RETRY_S", raising=False)
    kw = server_engine_kwargs(PG)
    assert kw["poolclass"] is NullPool and kw["pool_pre_ping"] is False
    # psycopg prepares nothing on the server: PgBouncer in transaction mode shares server connections
    assert kw["connect_args"] == {"connect_timeout": 10, "prepare_threshold": None}


def test_n_is_a_pool_of_n_and_no_overflow(monkeypatch):
    monkeypatch.setenv("NOVA_DB_POOL_SIZE", "4")
    kw = server_engine_kwargs(PG)
    assert (kw["pool_size"], kw["max_overflow"], kw["pool_timeout"]) == (4, 0, 30)


def test_sqlite_keeps_its_own_pool(monkeypatch):
    monkeypatch.setenv("NOVA_DB_POOL_SIZE", "0")
    assert server_engine_kwargs(make_url("sqlite:///x.db")) == {"connect_args": {"timeout": 60}}


@pytest.mark.parametrize("value", ["1", "-3", "two"])
def test_a_pool_too_small_for_the_lock_and_the_ask_is_refused_naming_the_variable(monkeypatch, value):
    monkeypatch.setenv("NOVA_DB_POOL_SIZE", value)
    with pytest.raises(InputError) as e:
        server_engine_kwargs(PG)
    assert f"NOVA_DB_POOL_SIZE={value!r}" in str(e.value) and "at least 2" in str(e.value)


@pytest.mark.parametrize(("window", "timeout"), [("300", 10), ("5", 5), ("2.5", 3), ("0.5", 2), ("0", 10)])
def test_a_connection_attempt_is_bounded_by_the_retry_window(monkeypatch, window, timeout):
    """Each attempt ends within NOVA_STORAGE_RETRY_S (psycopg's floor 2 s): a server that accepts the
    connection and never answers costs a command about its window, not a 10 s attempt past it; the
    schema lock's engine (create, run, db upgrade) has the same bound as Optuna's storage."""
    monkeypatch.setenv("NOVA_STORAGE_RETRY_S", window)
    assert server_engine_kwargs(PG)["connect_args"]["connect_timeout"] == timeout
    assert engine_kwargs(PG)["connect_args"] == {"connect_timeout": timeout}
