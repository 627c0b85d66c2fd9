"""Opening the study storage: the one place an Optuna ``RDBStorage`` is built.

- ``open_storage(url)``: for workers and set-up. Creates Optuna's tables when they are missing,
  records heartbeats (``heartbeat_interval`` / ``grace_period``, default NOVA_HEARTBEAT_INTERVAL = 30 s
  and NOVA_GRACE_PERIOD = 120 s) and re-queues a dead worker's trial once.
- ``open_storage(url, read_only=True)``: for readers. Never creates a table (a mistyped SQLite path
  is an error, not a new empty database).

On a database server no idle connection is kept (``connections``: a connection per transaction, or a
bounded pool with NOVA_DB_POOL_SIZE), a 60 s lock wait on SQLite.
Every failure leaves as ``StorageError`` with the URL masked.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import optuna
from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback

from nova_search.db._url import check_sqlite_file, env_number, mask, parse, retry_window_s, sqlite_path
from nova_search.db.connections import pool_size, server_engine_kwargs, track
from nova_search.db.failures import storage_errors
from nova_search.db.retry import retrying
from nova_search.errors import StorageError


def heartbeat_settings() -> tuple[int, int]:
    """(heartbeat interval, grace period) in whole seconds, from the environment (NOVA_HEARTBEAT_INTERVAL,
    default 30, 1 to 3600; NOVA_GRACE_PERIOD, default 120, 1 to a day): InputError naming the variable
    for anything else."""
    return (
        int(env_number("NOVA_HEARTBEAT_INTERVAL", 30, 1, 3600, whole=True)),
        int(env_number("NOVA_GRACE_PERIOD", 120, 1, 86_400, whole=True)),
    )


def check_settings() -> None:
    """Read every storage setting of the environment once (NOVA_STORAGE_RETRY_S, NOVA_HEARTBEAT_INTERVAL,
    NOVA_GRACE_PERIOD, NOVA_DB_POOL_SIZE): InputError naming a bad one, before anything is opened,
    locked or created."""
    retry_window_s()
    heartbeat_settings()
    pool_size()


def open_storage(
    url: str,
    *,
    read_only: bool = False,
    heartbeat_interval: int | None = None,
    grace_period: int | None = None,
    retry_s: float = 0.0,
) -> RDBStorage:
    """Optuna's RDBStorage on ``url``; see the module docstring. ``retry_s``: how long a database
    that is away (restarting) is waited for."""
    parsed = parse(url)
    check_sqlite_file(url)
    if read_only:
        path = sqlite_path(parsed)
        if path is not None and not Path(path).exists():
            raise StorageError(f"cannot open storage {mask(url)}: no such database file {path!r}")
    interval, grace = heartbeat_settings()
    kwargs: dict[str, object] = {"engine_kwargs": server_engine_kwargs(parsed)}

    def build() -> RDBStorage:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            if read_only:
                kwargs["skip_table_creation"] = True
            else:
                kwargs.update(
                    heartbeat_interval=heartbeat_interval or interval,
                    grace_period=grace_period or grace,
                    heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(max_retry=1),
                )
            storage = RDBStorage(url, **kwargs)  # type: ignore[arg-type]
            track(storage.engine)
            return storage

    with storage_errors(url, "open storage"):
        return retrying(build, retry_s, "open storage", url=url)


def rdb_storage(study: optuna.Study) -> RDBStorage:
    """The RDBStorage under a study (Optuna wraps it in a cache layer)."""
    storage = getattr(study._storage, "_backend", study._storage)
    if not isinstance(storage, RDBStorage):
        raise StorageError("nova-search needs an RDB storage (a SQLAlchemy URL)")
    return storage


def study_names(storage: RDBStorage, url: str) -> list[str]:
    with storage_errors(url, "read the studies in"):
        return optuna.study.get_all_study_names(storage)
