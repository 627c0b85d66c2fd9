"""Storage URLs for nova's tables: parse (typed errors), mask, and open an engine the house way.

Every error raised here names the URL masked and never carries the driver's message, which can
echo the URL (and with it the password).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, create_engine
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from nova_search.errors import StorageError


def mask(url: str) -> str:
    # imported here: nova_search.study imports trial, and trial will import this package
    from nova_search.study import mask_url

    return mask_url(url)


def parse(url: str) -> URL:
    try:
        return make_url(url)
    except (ArgumentError, ValueError, TypeError):
        raise StorageError(
            f"storage URL {mask(url)!r} is not a SQLAlchemy URL "
            "(e.g. sqlite:///nova.db or postgresql+psycopg://user:pw@host/db)"
        ) from None


def is_sqlite(url: str) -> bool:
    return parse(url).get_backend_name() == "sqlite"


def open_engine(url: str, **kwargs: Any) -> Engine:
    """An engine with ``pool_pre_ping`` on servers and a 60 s lock timeout on SQLite."""
    parsed = parse(url)
    if parsed.get_backend_name() == "sqlite":
        kwargs.setdefault("connect_args", {"timeout": 60})
    else:
        kwargs.setdefault("pool_pre_ping", True)
    try:
        return create_engine(parsed, **kwargs)
    except (ArgumentError, ImportError, ValueError, TypeError) as e:
        raise StorageError(f"cannot open storage {mask(url)}: {type(e).__name__}") from None
