"""The trial budget across workers: what counts toward it, and the lock that makes "count, then ask"
exact when many workers share one study.

The budget counts measurements. A configuration the compatibility table refuses before launch
(``search.rules``: the trial ends PRUNED with reason ``incompatible``, and infeasible, so the sampler
learns to avoid it) is counted apart (``count_refused``), not toward the budget: ``--n-trials 2`` measures
two configurations however many refused ones the sampler draws on the way. So that a space that is
refused almost everywhere cannot keep a worker drawing forever, the budget is also spent once the
refused trials reach ``refused_limit(budget)``.

``StorageLock(engine, name)`` serialises a critical section across processes and hosts that share
the storage: a PostgreSQL advisory lock (keyed by a hash of ``name``), filelock's
``FileLock`` (an exclusive ``flock``) on a file beside a SQLite database, a process-local lock for an
in-memory SQLite database (no other process can see it). Any other dialect is refused with a clear
error rather than left unlocked, since an unlocked budget overshoots under concurrent workers.

On PostgreSQL the lock is a transaction-level advisory lock (``pg_try_advisory_xact_lock``) in a
transaction held open on a connection of its own for the section: COMMIT (or the connection's end:
a killed worker, a cut network) releases it, and it works through PgBouncer in transaction mode,
which pins a server connection for the length of a transaction. At most ``LOCK_QUEUE`` workers wait
for it on an open connection (each first takes one of ``LOCK_QUEUE`` queue places, themselves
advisory locks, with ``pg_try_advisory_xact_lock``, then blocks on the lock: the lock passes to the
next one at once). The others close their connection and try again after a short jittered wait
(``LOCK_FIRST_WAIT_S`` doubling to ``LOCK_MAX_WAIT_S``), their connection closed, not pooled: 200
workers waiting for the lock hold
``LOCK_QUEUE`` connections, not 200 (a blocking ``pg_advisory_lock`` held one each: at 200 workers,
twice PostgreSQL's default ``max_connections``).

The file lock keeps its file (``preserve_lock_file``): a worker of an older nova, which opens the
same path, then locks the same file; and it never falls back to a lock file whose removal is the
release (a killed worker would leave it behind), where the kernel releases a dead holder's ``flock``.
"""

from __future__ import annotations

import hashlib
import os
import random
import threading
import time
from typing import Any

from filelock import FileLock, Timeout
from optuna.trial import FrozenTrial, TrialState
from sqlalchemy import Engine, text

from nova_search.db._url import sqlite_path
from nova_search.errors import StorageError
from nova_search.schema import REASON, RETRY_OF

#: dialects StorageLock can lock
LOCKABLE = ("postgresql", "sqlite")

_local_locks: dict[str, threading.Lock] = {}
_local_guard = threading.Lock()


#: how many workers wait for the PostgreSQL lock on an open connection (the rest retry, holding none).
#: 3, with waits up to 1 s, made 200 simulated workers' retries 386 transactions a second (each a new
#: connection: a forked backend), PostgreSQL at a full core and the lock's holder starved of CPU
#: (benchmarks/results/fleet-scale); 16 places and waits up to 8 s cut the retries about tenfold
LOCK_QUEUE = 16
#: a worker that found the lock and its queue full tries again after this, doubling up to LOCK_MAX_WAIT_S
LOCK_FIRST_WAIT_S = 0.05
LOCK_MAX_WAIT_S = 8.0

#: the reason (``schema.REASON``) of a trial whose configuration was refused before launch
REFUSED_REASON = "incompatible"
#: refused configurations allowed per trial of the budget before the budget counts as spent anyway
REFUSED_PER_TRIAL = 10


def refused(t: FrozenTrial) -> bool:
    """Whether the trial's configuration was refused by the compatibility table (never launched)."""
    return t.state == TrialState.PRUNED and REASON.read(t.user_attrs) == REFUSED_REASON


def count_toward_budget(trials: list[FrozenTrial]) -> int:
    """Trials that use up the budget: running or finished, except failed trials that were retried
    (their retry is the trial that counts) and configurations refused before launch (counted apart,
    ``count_refused``). WAITING trials (baselines, retries) are not yet counted."""
    retried = {t.system_attrs.get(RETRY_OF) for t in trials} - {None}
    return sum(
        1
        for t in trials
        if (t.state in (TrialState.RUNNING, TrialState.COMPLETE, TrialState.PRUNED) and not refused(t))
        or (t.state == TrialState.FAIL and t.number not in retried)
    )


def count_refused(trials: list[FrozenTrial]) -> int:
    """Configurations the compatibility table refused before launch: apart from the budget."""
    return sum(1 for t in trials if refused(t))


def refused_limit(budget: int) -> int:
    """How many refused configurations a study of ``budget`` trials draws before it stops drawing."""
    return max(REFUSED_PER_TRIAL * budget, 20)


def budget_spent(trials: list[FrozenTrial], budget: int) -> bool:
    """Whether no new trial may be asked: the budget of measured trials is met, or the sampler has
    drawn ``refused_limit(budget)`` refused configurations (the space is refused almost everywhere)."""
    return count_toward_budget(trials) >= budget or count_refused(trials) >= refused_limit(budget)


class StorageLock:
    """A lock shared by everyone using the storage of ``engine``; see the module docstring."""

    def __init__(self, engine: Engine, name: str) -> None:
        self.engine = engine
        self.name = name
        self.key = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)
        self._queue = [
            int.from_bytes(hashlib.sha256(f"{name}#queue{i}".encode()).digest()[:8], "big", signed=True)
            for i in range(LOCK_QUEUE)
        ]
        self.dialect = engine.url.get_backend_name()
        if self.dialect not in LOCKABLE:
            raise StorageError(
                f"nova-search cannot lock a {self.dialect} storage (it serialises the trial budget with "
                "PostgreSQL advisory locks or a file beside a SQLite database): use PostgreSQL or SQLite"
            )
        self.path = sqlite_path(engine.url)
        self._conn: Any = None
        self._file: FileLock | None = None
        self._local: threading.Lock | None = None

    def __enter__(self) -> StorageLock:
        self._acquire(blocking=True)
        return self

    def attempt(self) -> bool:
        """Take the lock if it is free, at once; False (holding nothing) if someone holds it. Release a
        lock taken this way with ``release``."""
        return self._acquire(blocking=False)

    def release(self) -> None:
        self.__exit__(None, None, None)

    def _acquire(self, blocking: bool) -> bool:
        if self.dialect == "postgresql":
            self._conn = self._take_pg(blocking)
            return self._conn is not None
        if self.path:
            folder = os.path.dirname(os.path.abspath(self.path))
            if not os.path.isdir(folder):  # filelock would create it: a mistyped path must not
                raise StorageError(f"the SQLite database's folder does not exist: {folder}")
            file = FileLock(self.path + ".nova-lock", mode=0o600, preserve_lock_file=True)
            try:
                file.acquire(timeout=-1 if blocking else 0)
            except Timeout:
                return False
            self._file = file
            return True
        with _local_guard:
            local = _local_locks.setdefault(self.name, threading.Lock())
        if not local.acquire(blocking=blocking):
            return False
        self._local = local
        return True

    def _take_pg(self, blocking: bool) -> Any:
        """A connection in a transaction that holds the lock; tried again, holding nothing between
        tries, until it is free (see the module docstring). Not ``blocking``: None at once when it
        is held."""
        wait = LOCK_FIRST_WAIT_S
        try_lock = text("SELECT pg_try_advisory_xact_lock(:k)")
        while True:
            conn = self.engine.connect()
            try:
                if conn.execute(try_lock, {"k": self.key}).scalar_one():
                    return conn
                if not blocking:
                    conn.rollback()
                    conn.close()
                    return None
                for place in self._queue:  # a place in the queue: wait on this connection
                    if conn.execute(try_lock, {"k": place}).scalar_one():
                        conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": self.key})
                        return conn
                conn.rollback()
                conn.invalidate()  # closed for good, not kept in the pool: a worker waiting holds nothing
            except BaseException:
                conn.close()
                raise
            conn.close()
            time.sleep(wait * random.uniform(0.5, 1.0))  # noqa: S311 - spreading waits, not a secret
            wait = min(wait * 2, LOCK_MAX_WAIT_S)

    def __exit__(self, *exc: object) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            try:
                conn.commit()  # ends the transaction, and with it the lock
            except Exception:  # noqa: BLE001 - a lost connection's transaction, and lock, ended with it
                pass
            finally:
                conn.close()
        if self._file is not None:
            file, self._file = self._file, None
            file.release()
        if self._local is not None:
            self._local.release()
            self._local = None
