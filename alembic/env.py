"""alembic environment for nova's own tables (``nova_*``); Optuna's schema is never touched.

The URL comes from, in order: ``config.attributes["url"]`` (``nova_search.db.migrate``), ``-x
url=...`` on the alembic command line, the ``NOVA_STORAGE`` environment variable. Versions live in
``nova_alembic_version`` (Optuna keeps ``alembic_version``) and autogenerate only considers tables
whose name starts with ``nova_``.
"""

from __future__ import annotations

import os
from logging.config import fileConfig

from alembic import context
from sqlalchemy import pool

from nova_search.db._url import open_engine, parse
from nova_search.db.migrate import VERSION_TABLE, include_object
from nova_search.db.tables import Base

config = context.config

if config.config_file_name is not None:
    fileConfig(config.config_file_name, disable_existing_loggers=False)

target_metadata = Base.metadata


def _url() -> str:
    url = config.attributes.get("url") or context.get_x_argument(as_dictionary=True).get("url")
    url = url or os.environ.get("NOVA_STORAGE")
    if not url:
        raise SystemExit(
            "no database URL: pass -x url=postgresql+psycopg://user:pw@host/db or set NOVA_STORAGE"
        )
    return url


def _configure_kwargs(url: str) -> dict[str, object]:
    return {
        "target_metadata": target_metadata,
        "version_table": VERSION_TABLE,
        "include_object": include_object,
        # SQLite cannot ALTER most things in place; batch mode copies the table instead
        "render_as_batch": parse(url).get_backend_name() == "sqlite",
        "compare_type": True,
    }


def run_migrations_offline() -> None:
    url = _url()
    context.configure(
        url=parse(url),
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
        **_configure_kwargs(url),
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    url = _url()
    engine = open_engine(url, poolclass=pool.NullPool)
    try:
        with engine.connect() as connection:
            context.configure(connection=connection, **_configure_kwargs(url))
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
