"""nova's schema migrations, run as an explicit step (``nova-search db upgrade``), never by a worker.

Optuna's schema comes first: instantiating ``RDBStorage`` creates Optuna's tables and stamps its
own ``alembic_version`` when they are missing. Then nova's alembic scripts run with their own version
table, ``nova_alembic_version``, and only ever touch ``nova_`` tables. The scripts live in the checkout's
top-level ``alembic/`` (where ``alembic.ini`` points) and the wheel carries them as
``nova_search/db/migrations/`` (pyproject.toml maps the folder), so a plain ``pip install`` can migrate.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import alembic.command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from nova_search.db._url import open_engine, parse
from nova_search.db.budget import StorageLock
from nova_search.db.failures import storage_errors
from nova_search.db.retry import retrying, storage_retry_s
from nova_search.db.storage import open_storage
from nova_search.db.tables import TABLE_PREFIX

#: nova's alembic version table; Optuna keeps the default ``alembic_version`` for itself
VERSION_TABLE = "nova_alembic_version"


def _scripts_dir() -> Path:
    """The folder with ``env.py`` and ``versions/``: inside the installed package (a wheel), else the
    checkout's ``alembic/`` (an editable install or a source tree). Found by path, not imported: alembic
    loads the scripts by path, and an editable install cannot import the mapped folder (it has no
    ``__init__.py``, which at the repository root would shadow the alembic library)."""
    db_dir = Path(__file__).resolve().parent
    packaged = db_dir / "migrations"
    return packaged if (packaged / "env.py").is_file() else db_dir.parents[1] / "alembic"


#: nova's alembic scripts (``env.py``, ``versions/``), in every install
ALEMBIC_DIR = _scripts_dir()


def include_object(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    """alembic's autogenerate filter: only nova's tables (and what hangs off them), never Optuna's,
    never the version table."""
    if type_ == "table":
        table_name = name or ""
    else:
        table = getattr(obj, "table", None)
        table_name = getattr(table, "name", None) or ""
    return table_name.startswith(TABLE_PREFIX) and table_name != VERSION_TABLE


def alembic_config(url: str) -> Config:
    """A programmatic alembic Config for ``url`` (passed in attributes, never through the .ini
    parser, whose %-interpolation would mangle passwords)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(ALEMBIC_DIR))
    cfg.attributes["url"] = url
    return cfg


def head_revision() -> str | None:
    """The newest revision this nova-search ships."""
    return ScriptDirectory(str(ALEMBIC_DIR)).get_current_head()


def upgrade(url: str, revision: str = "head") -> None:
    """Create or update Optuna's schema, then nova's tables up to ``revision``. Serialised across
    processes (``StorageLock``): two first runs on one empty database do not race to create tables.
    A database that is away is waited for within NOVA_STORAGE_RETRY_S, each connection attempt
    bounded by it (``_url.connect_timeout``): a server that accepts connections and never answers ends
    in a StorageError about when the window ends, as for every other command."""
    parse(url)
    window = storage_retry_s()
    engine = open_engine(url)

    def locked() -> None:
        with storage_errors(url, "lock the schema of"), StorageLock(engine, "nova-search#schema"):
            _ensure_optuna_schema(url)
            with storage_errors(url, f"upgrade nova's tables to {revision!r} in"):
                alembic.command.upgrade(alembic_config(url), revision)

    try:
        retrying(locked, window, "lock the schema of", url=url)
    finally:
        engine.dispose()


def downgrade(url: str, revision: str) -> None:
    """Take nova's tables down to ``revision`` (``base`` drops them all); Optuna's stay."""
    parse(url)
    with storage_errors(url, f"downgrade nova's tables to {revision!r} in"):
        alembic.command.downgrade(alembic_config(url), revision)


def current(url: str) -> str | None:
    """The revision nova's tables are at, or None when they were never created."""
    engine = open_engine(url)
    try:
        with storage_errors(url, "read nova's schema revision from"), engine.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE})
            return ctx.get_current_revision()
    finally:
        engine.dispose()


def _ensure_optuna_schema(url: str) -> None:
    optuna_logger = logging.getLogger("optuna")
    level = optuna_logger.level
    optuna_logger.setLevel(logging.WARNING)
    try:
        open_storage(url).engine.dispose()  # retried by upgrade, around the lock
    finally:
        optuna_logger.setLevel(level)
