"""Storage URLs for nova's tables: parse (typed errors), mask, and open an engine the house way.

Every error raised here names the URL masked and never carries the driver's message, which can
echo the URL (and with it the password).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote

from sqlalchemy import Engine, create_engine
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from nova_search.errors import StorageError
from nova_search.redact import secret_name

#: a query parameter of a rendered URL
_QUERY_PARAM = re.compile(r"(?<=[?&])([^=&]+)=([^&]*)")


def mask(url: str) -> str:
    """The URL with its password, and the value of every query parameter whose name says it holds a
    secret (``?password=``, ``sslpassword``, ``passfile``, ``...token``: ``redact.secret_name``),
    replaced by ***: safe for logs, errors and the stored spec."""
    try:
        shown = make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError, TypeError):
        return "<unparseable storage URL>"
    return _QUERY_PARAM.sub(
        lambda m: f"{m.group(1)}=***" if secret_name(unquote(m.group(1))) else m.group(0), shown
    )


def engine_kwargs(url: URL) -> dict[str, Any]:
    """``pool_pre_ping`` on database servers (Optuna only sets it for MySQL); a 60 s lock wait on SQLite."""
    if is_sqlite(url):
        return {"connect_args": {"timeout": 60}}
    return {"pool_pre_ping": True}


def parse(url: str) -> URL:
    try:
        return make_url(url)
    except (ArgumentError, ValueError, TypeError):
        raise StorageError(
            f"storage URL {mask(url)!r} is not a SQLAlchemy URL "
            "(e.g. sqlite:///nova.db or postgresql+psycopg://user:pw@host/db)"
        ) from None


def is_sqlite(url: str | URL) -> bool:
    return (url if isinstance(url, URL) else parse(url)).get_backend_name() == "sqlite"


def sqlite_path(url: str | URL) -> str | None:
    """The database file of a SQLite URL; None for another dialect or an in-memory database."""
    parsed = url if isinstance(url, URL) else parse(url)
    if not is_sqlite(parsed) or parsed.database in (None, "", ":memory:"):
        return None
    return parsed.database


def open_engine(url: str, **kwargs: Any) -> Engine:
    """An engine with ``pool_pre_ping`` on servers and a 60 s lock timeout on SQLite."""
    parsed = parse(url)
    for key, value in engine_kwargs(parsed).items():
        kwargs.setdefault(key, value)
    try:
        return create_engine(parsed, **kwargs)
    except (ArgumentError, ImportError, ValueError, TypeError) as e:
        raise StorageError(f"cannot open storage {mask(url)}: {type(e).__name__}") from None
