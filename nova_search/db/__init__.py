"""db/ owns storage: opening it, the dialects, locking, retries, errors, and nova's own tables.

open_storage(url[, read_only])           the one place an Optuna RDBStorage is built (storage)
mask(url) / parse_url(url) / is_sqlite   URLs, safe to print (_url)
storage_errors(url, doing)               the one wrapper: any failure -> StorageError, masked (errors)
retrying(fn, window_s, doing)            transient errors retried with backoff (retry)
StorageLock(engine, name)                a lock across workers; count_toward_budget, budget_spent (budget)
upgrade / downgrade / current            Optuna's schema, then nova's tables (migrate)
LevelStore(url).record / .rows           idempotent per-level rows (store)
BEST_AT_CONCURRENCY_SQL                  plain SQL joining Optuna's trials (queries)
storage_of / backend_of / study_id / trial_id / forget_trials_cache / cached_trials / rng_of
                                         Optuna's private handles, read here only (handles)
"""

from nova_search.db._url import check_sqlite_file, is_sqlite, mask, open_engine, sqlite_path
from nova_search.db._url import parse as parse_url
from nova_search.db.budget import StorageLock, budget_spent, count_refused, count_toward_budget
from nova_search.db.failures import TRANSIENT, storage_error, storage_errors
from nova_search.db.handles import (
    backend_of,
    cached_trials,
    forget_trials_cache,
    rng_of,
    storage_of,
    study_id,
    trial_id,
)
from nova_search.db.migrate import current, downgrade, upgrade
from nova_search.db.queries import BEST_AT_CONCURRENCY_SQL
from nova_search.db.retry import retrying, storage_retry_s
from nova_search.db.storage import (
    check_settings,
    heartbeat_settings,
    open_storage,
    rdb_storage,
    study_names,
)
from nova_search.db.store import LevelStore
from nova_search.db.tables import Base, LevelResultRow

__all__ = [
    "BEST_AT_CONCURRENCY_SQL",
    "TRANSIENT",
    "Base",
    "LevelResultRow",
    "LevelStore",
    "StorageLock",
    "backend_of",
    "budget_spent",
    "cached_trials",
    "count_refused",
    "count_toward_budget",
    "current",
    "downgrade",
    "forget_trials_cache",
    "heartbeat_settings",
    "is_sqlite",
    "mask",
    "check_settings",
    "check_sqlite_file",
    "open_engine",
    "open_storage",
    "parse_url",
    "rdb_storage",
    "retrying",
    "rng_of",
    "sqlite_path",
    "storage_error",
    "storage_of",
    "storage_errors",
    "storage_retry_s",
    "study_id",
    "study_names",
    "trial_id",
    "upgrade",
]
