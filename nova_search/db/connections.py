"""How many database connections a worker holds, and when it gives them back (docs/deploy/cluster.md,
"Connections and fleet size").

The policy, for a database server (PostgreSQL):

- **No idle connection is kept** (the default). Every engine nova builds (Optuna's storage, the level
  store) uses SQLAlchemy's ``NullPool``: a connection is opened for one transaction and closed at its
  end. A worker holds a connection only while a statement runs, plus one for the budget lock while it
  counts and asks; none while its trial runs between heartbeats, none while it waits for the lock
  (``db.budget``) or for the database. A pool keeps its connections while the worker does nothing
  with them: before this policy a worker held up to 6 (Optuna's 5 + 10, the lock, the level store),
  and even a pool of one per worker would need 200 of PostgreSQL's default 100 for 200 workers. The
  price is a connection set-up per transaction (a forked backend on the server: the fleet benchmark
  measures it).
- ``NOVA_DB_POOL_SIZE=N`` (N >= 2, since the budget lock and the ask under it hold two): a pool of at
  most N per engine (``max_overflow`` 0, a 30 s ``pool_timeout``) whose connections are closed once
  the engine has been idle for ``IDLE_CLOSE_S``, by one reaper thread per process. For a server behind
  PgBouncer, or a small fleet on a large server. ``NOVA_DB_POOL_SIZE=0`` is the default.
- **Nothing is held while waiting**: every engine is disposed before a backoff sleep (``release``).
- **A connection attempt is bounded**: ``connect_timeout`` 10 s, so a black-holed address (or a
  server that accepts the connection and never answers) fails (and is retried) instead of hanging;
  within a retry window shorter than that, the window (at least 2 s, psycopg's floor): every command
  gives up about when NOVA_STORAGE_RETRY_S ends.
- **No server-side prepared statements** (psycopg's ``prepare_threshold=None``), so that the workers
  can share a PgBouncer in transaction mode (docs/deploy/cluster.md).

SQLite keeps SQLAlchemy's default pool: it is one file on one host, there is no connection limit.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy.engine import URL
from sqlalchemy.pool import NullPool

from nova_search.db._url import CONNECT_TIMEOUT_S, connect_timeout, engine_kwargs, is_sqlite
from nova_search.errors import InputError

__all__ = ["CONNECT_TIMEOUT_S", "pool_size", "release", "server_engine_kwargs", "track"]
#: how long a worker waits for one of its own pooled connections
POOL_TIMEOUT_S = 30
#: a pooled connection idle for this long is closed
IDLE_CLOSE_S = 0.5
#: the environment variable that chooses a bounded pool instead of none
POOL_ENV = "NOVA_DB_POOL_SIZE"

_engines: weakref.WeakSet[Engine] = weakref.WeakSet()
_engines_guard = threading.Lock()


def pool_size() -> int:
    """NOVA_DB_POOL_SIZE: 0 (the default), no pool; N >= 2, a pool of at most N per engine."""
    raw = os.environ.get("NOVA_DB_POOL_SIZE", "0").strip() or "0"
    try:
        size = int(raw)
    except ValueError:
        size = -1
    if size != 0 and size < 2:
        raise InputError(
            f"{POOL_ENV}={raw!r}: give 0 (no pool: a connection per transaction, the default) or a whole "
            "number of at least 2 (the budget lock and the ask under it hold two connections at once)"
        )
    return size


def server_engine_kwargs(url: URL) -> dict[str, Any]:
    """The keyword arguments of ``create_engine`` for ``url`` under the policy above."""
    kwargs = engine_kwargs(url)
    if is_sqlite(url):
        return kwargs
    size = pool_size()
    if size == 0:
        kwargs["pool_pre_ping"] = False  # every connection is new: nothing stale to ping
        kwargs["poolclass"] = NullPool
    else:
        kwargs.update(pool_size=size, max_overflow=0, pool_timeout=POOL_TIMEOUT_S)
    if url.get_backend_name() == "postgresql":
        connect: dict[str, Any] = {"connect_timeout": connect_timeout()}
        if url.get_driver_name() == "psycopg":
            # no server-side prepared statements: they live on one server connection, which PgBouncer in
            # transaction mode hands to another client (Debian 12's 1.18: "prepared statement _pg3_0
            # already exists"), and a connection that lasts one transaction would rarely reuse one
            connect["prepare_threshold"] = None
        kwargs["connect_args"] = {**kwargs.get("connect_args", {}), **connect}
    return kwargs


#: id(engine) -> monotonic time its pool last gave a connection out or took one back
_last_use: dict[int, float] = {}
_reaper: threading.Thread | None = None


def track(engine: Engine) -> Engine:
    """Remember ``engine``: ``release`` gives its idle connections back, and (for a pool) the reaper
    closes them once they have been idle for ``IDLE_CLOSE_S``."""
    global _reaper
    with _engines_guard:
        _engines.add(engine)
        if isinstance(engine.pool, NullPool) or is_sqlite(engine.url):
            return engine
        key = id(engine)
        _last_use[key] = time.monotonic()
        weakref.finalize(engine, _last_use.pop, key, None)

        def used(*_: object) -> None:
            _last_use[key] = time.monotonic()

        event.listen(engine, "checkout", used)
        event.listen(engine, "checkin", used)
        if _reaper is None or not _reaper.is_alive():
            _reaper = threading.Thread(target=_reap, daemon=True, name="nova-db-idle-close")
            _reaper.start()
    return engine


def _reap() -> None:
    """Close the pooled connections of every engine idle for IDLE_CLOSE_S (one thread per process)."""
    tick = threading.Event()  # never set: its wait is a sleep that a test's patched time.sleep leaves alone
    while True:
        tick.wait(IDLE_CLOSE_S / 2)
        with _engines_guard:
            engines = [e for e in _engines if id(e) in _last_use]
        now = time.monotonic()
        for engine in engines:
            pool = engine.pool
            idle = getattr(pool, "checkedin", lambda: 0)()
            if idle and now - _last_use.get(id(engine), now) >= IDLE_CLOSE_S:
                try:
                    engine.dispose(close=True)  # closes the idle ones; ones in use close when given back
                except Exception:  # noqa: BLE001, S110 - tried again on the next round
                    pass


def release() -> None:
    """Close every idle pooled connection of every engine nova built in this process (before a
    backoff sleep: a worker waiting for the database holds nothing). Connections in use are closed
    when they are given back."""
    with _engines_guard:
        engines = list(_engines)
    for engine in engines:
        try:
            engine.dispose(close=True)
        except Exception:  # noqa: BLE001, S110 - a pool that cannot close is no reason to stop retrying
            pass
