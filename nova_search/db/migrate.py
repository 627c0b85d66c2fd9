"""nova's schema migrations, run as an explicit step (``nova-search db upgrade``), never by a worker.

Optuna's schema comes first: instantiating ``RDBStorage`` creates Optuna's tables and stamps its
own ``alembic_version`` when they are missing. Then nova's alembic scripts (``db/migrations/``, shipped in
the package) run with their own version table, ``nova_alembic_version``, and only ever touch ``nova_`` tables.
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
from nova_search.db.storage import open_storage
from nova_search.db.tables import TABLE_PREFIX

#: nova's alembic version table; Optuna keeps the default ``alembic_version`` for itself
VERSION_TABLE = "nova_alembic_version"

#: the migrations folder inside the package (``env.py``, ``versions/``): present in every install
ALEMBIC_DIR = Path(__file__).resolve().parent / "migrations"


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
    processes (``StorageLock``): two first runs on one empty database do not race to create tables."""
    parse(url)
    engine = open_engine(url)
    try:
        with storage_errors(url, "lock the schema of"), StorageLock(engine, "nova-search#schema"):
            _ensure_optuna_schema(url)
            with storage_errors(url, f"upgrade nova's tables to {revision!r} in"):
                alembic.command.upgrade(alembic_config(url), revision)
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
        open_storage(url).engine.dispose()
    finally:
        optuna_logger.setLevel(level)
