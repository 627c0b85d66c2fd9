"""How many database connections a worker holds, and when it gives them back (docs/deploy/cluster.md,
"Connections").

The policy, for a database server (PostgreSQL):

- **No idle connection is kept.** Every engine nova builds (Optuna's storage, the level store) uses
  SQLAlchemy's ``NullPool``: a connection is opened for one transaction and closed at its end. A
  worker therefore holds a connection only while a statement runs (a few milliseconds), plus one for
  the budget lock while it counts and asks. A worker running a trial holds none between its
  heartbeats, and a worker waiting out an outage holds none at all. At most two per slot at any
  instant (the budget lock and the ask under it; or the heartbeat and an attribute write).
  With a pool that keeps connections, idle workers hold ``pool_size`` each, whatever they do:
  200 workers at one each would need 200 of PostgreSQL's default 100.
- **Or a bounded pool**, for a database behind PgBouncer, where connections to PgBouncer are cheap:
  ``NOVA_DB_POOL_SIZE=N`` (N >= 2, since the budget lock and the ask under it hold two) keeps at most
  N per worker (``max_overflow`` 0, a 30 s ``pool_timeout``). Every engine is disposed before a
  backoff sleep (``release``), so a worker never keeps connections while it waits for more.
- **A connection attempt is bounded**: ``connect_timeout`` 10 s, so a black-holed address fails
  (and is retried) instead of hanging.

SQLite keeps SQLAlchemy's default pool: it is one file on one host, there is no connection limit.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.engine import URL
from sqlalchemy.pool import NullPool

from nova_search.db._url import engine_kwargs, is_sqlite
from nova_search.errors import InputError

#: how long a connection attempt may take before it fails (and is retried as transient)
CONNECT_TIMEOUT_S = 10
#: how long a worker with a bounded pool waits for one of its own connections
POOL_TIMEOUT_S = 30
#: the environment variable that chooses a bounded pool instead of none
POOL_ENV = "NOVA_DB_POOL_SIZE"

_engines: weakref.WeakSet[Engine] = weakref.WeakSet()
_engines_guard = threading.Lock()


def pool_size() -> int:
    """NOVA_DB_POOL_SIZE: 0 (the default) keeps no connection; N >= 2 keeps at most N per engine."""
    raw = os.environ.get(POOL_ENV, "0").strip() or "0"
    try:
        size = int(raw)
    except ValueError:
        size = -1
    if size != 0 and size < 2:
        raise InputError(
            f"{POOL_ENV}={raw!r}: give 0 (no idle connection kept, the default) or a whole number of at "
            "least 2 (the budget lock and the ask under it hold two connections at once)"
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
        kwargs["connect_args"] = {**kwargs.get("connect_args", {}), "connect_timeout": CONNECT_TIMEOUT_S}
    return kwargs


def track(engine: Engine) -> Engine:
    """Remember ``engine`` so that ``release`` gives its idle connections back."""
    with _engines_guard:
        _engines.add(engine)
    return engine


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
