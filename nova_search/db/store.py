"""LevelStore: writes and reads nova's per-level rows (``nova_level_result``), one engine per store.

Writes are idempotent upserts on (trial_id, concurrency), so a retried write never duplicates a row,
and transient connection errors are retried with backoff for a configurable window (default 60 s)
so a PostgreSQL restart mid-study does not lose a level. Every error leaves as StorageError with
the URL masked and without the driver's message.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, Engine, inspect, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from nova_search.db._url import mask, open_engine, parse
from nova_search.db.connections import server_engine_kwargs, track
from nova_search.db.failures import storage_error
from nova_search.db.migrate import VERSION_TABLE, head_revision
from nova_search.db.retry import retrying
from nova_search.db.tables import METRIC_COLUMNS, LevelResultRow
from nova_search.errors import StorageError
from nova_search.measure.metrics import LevelResult

T = TypeVar("T")

TABLE = LevelResultRow.__table__
KEY = ("trial_id", "concurrency")
#: columns an upsert leaves alone: the identity and the first-write time
_KEEP_ON_UPDATE = frozenset({"id", *KEY, "created_at"})


class LevelStore:
    """nova's per-level rows in the storage at ``url`` (the same URL as the Optuna study)."""

    def __init__(self, url: str, *, retry_window_s: float = 60.0) -> None:
        self.url = url
        self.retry_window_s = retry_window_s
        self._masked = mask(url)
        self._engine = track(open_engine(url, **server_engine_kwargs(parse(url))))

    # --- lifecycle ---

    def close(self) -> None:
        self._engine.dispose()

    def __enter__(self) -> LevelStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- checks ---

    def check_ready(self) -> None:
        """Fail when nova's tables are missing or outdated. A cut connection raises a transient
        StorageError, which the caller's ``retrying`` retries (a worker started in a storm)."""
        try:
            with self._engine.connect() as conn:
                has_table = inspect(conn).has_table(TABLE.name)
                revision = _current_revision(conn) if has_table else None
        except SQLAlchemyError as e:
            raise storage_error(self.url, "reach", e) from None
        if not has_table:
            raise self._missing()
        head = head_revision()
        if revision != head:
            raise StorageError(
                f"nova's tables in {self._masked} are at revision {revision!r}, this nova-search "
                f"needs {head!r}; run `nova-search db upgrade --storage URL`"
            )

    # --- writes ---

    def record(
        self,
        *,
        trial_id: int,
        study_name: str,
        trial_number: int,
        level: LevelResult,
        engine_metrics: dict[str, float],
        worker_host: str,
        gpu_ids: str | Sequence[int],
        gpu_name: str | None,
        engine_version: str | None,
        argv: Sequence[str],
    ) -> None:
        """Insert or replace the row of (trial_id, level.concurrency)."""
        profile = level.as_dict()
        values: dict[str, Any] = {
            "trial_id": int(trial_id),
            "study_name": study_name,
            "trial_number": int(trial_number),
            "concurrency": int(level.concurrency),
            **{name: _finite(profile[name]) for name in METRIC_COLUMNS},
            "profile": _json_safe(profile),
            "engine_metrics": _json_safe(dict(engine_metrics)),
            "worker_host": worker_host,
            "gpu_ids": gpu_ids if isinstance(gpu_ids, str) else ",".join(str(g) for g in gpu_ids),
            "gpu_name": gpu_name,
            "engine_version": engine_version,
            "argv": [str(a) for a in argv],
        }
        self._retrying("write a level result to", lambda: self._upsert(values))

    def _upsert(self, values: dict[str, Any]) -> None:
        dialect = self._engine.dialect.name
        if dialect not in ("postgresql", "sqlite"):
            _upsert_portable(self._engine, values)
            return
        insert = pg_insert if dialect == "postgresql" else sqlite_insert
        stmt = insert(TABLE).values(**values)
        stmt = stmt.on_conflict_do_update(
            index_elements=list(KEY),
            set_={k: stmt.excluded[k] for k in values if k not in _KEEP_ON_UPDATE},
        )
        with self._engine.begin() as conn:
            conn.execute(stmt)

    # --- reads ---

    def rows(self, study_name: str, columns: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """Every row of the study, ordered by trial number then concurrency: all columns, or only
        ``columns`` (a reader of an older schema revision asks for what every revision has)."""
        chosen = [TABLE.c[c] for c in columns] if columns else [TABLE]
        stmt = (
            select(*chosen)
            .where(TABLE.c.study_name == study_name)
            .order_by(TABLE.c.trial_number, TABLE.c.concurrency)
        )

        def read() -> list[dict[str, Any]]:
            with self._engine.connect() as conn:
                return [dict(r._mapping) for r in conn.execute(stmt)]

        return self._retrying("read level results from", read)

    # --- plumbing ---

    def _missing(self) -> StorageError:
        return StorageError(
            f"nova's tables are missing in {self._masked}; run `nova-search db upgrade --storage URL`"
        )

    def _retrying(self, doing: str, fn: Callable[[], T]) -> T:
        """Run ``fn``, retrying transient connection errors with backoff inside the window; a missing
        table is final (run ``db upgrade``), any other failure leaves as StorageError."""

        def fatal(e: BaseException) -> StorageError | None:
            return self._missing() if _is_missing_table(e) else None

        try:
            return retrying(fn, self.retry_window_s, doing, url=self.url, fatal=fatal)
        except SQLAlchemyError as e:
            raise fatal(e) or storage_error(self.url, doing, e) from None


def _current_revision(conn: Connection) -> str | None:
    return MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE}).get_current_revision()


def _upsert_portable(engine: Engine, values: dict[str, Any]) -> None:
    """Update-then-insert for dialects without ON CONFLICT; a lost insert race becomes an update."""
    changes = {k: v for k, v in values.items() if k not in _KEEP_ON_UPDATE}
    match = (TABLE.c.trial_id == values["trial_id"]) & (TABLE.c.concurrency == values["concurrency"])
    for _ in range(2):
        try:
            with engine.begin() as conn:
                if conn.execute(update(TABLE).where(match).values(**changes)).rowcount == 0:
                    conn.execute(TABLE.insert().values(**values))
            return
        except IntegrityError:
            continue  # another writer inserted the same key between our update and insert
    raise StorageError("could not upsert a level result: the row kept conflicting")


def _is_missing_table(e: SQLAlchemyError) -> bool:
    # PostgreSQL: UndefinedTable (sqlstate 42P01); SQLite: OperationalError "no such table"
    orig = getattr(e, "orig", None)
    return getattr(orig, "sqlstate", None) == "42P01" or "no such table" in str(orig)


def _finite(value: Any) -> Any:
    """Plain Python numbers; NaN and infinities become NULL (undefined, and not JSON anyway)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    value = float(value)
    return value if math.isfinite(value) else None


def _json_safe(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return _finite(value)
