"""Storage URLs for nova's tables: parse (typed errors), mask, and open an engine the house way.

Every error raised here names the URL masked and never carries the driver's message, which can
echo the URL (and with it the password).
"""

from __future__ import annotations

import math
import os
import re
from typing import Any
from urllib.parse import unquote

from sqlalchemy import Engine, create_engine
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from nova_search.errors import InputError, SpecError, StorageError
from nova_search.redact import secret_name

#: a query parameter of a rendered URL
_QUERY_PARAM = re.compile(r"(?<=[?&])([^=&]+)=([^&]*)")


#: query parameters whose values are shown: connection settings that hold no secret (libpq's, and
#: SQLite's URI options). Any other's value is masked, a secret's by name (``password``, ``passfile``)
#: and an unknown one's too: ``options`` carries server settings (``-c password=...``), and a parameter
#: nova does not know may hold anything
SHOWN_QUERY = frozenset(
    {
        "sslmode", "sslrootcert", "sslcert", "sslkey", "sslcrl", "sslcrldir", "sslsni", "requiressl",
        "sslcompression", "ssl_min_protocol_version", "ssl_max_protocol_version", "gssencmode",
        "channel_binding", "require_auth", "connect_timeout", "application_name",
        "fallback_application_name", "target_session_attrs", "load_balance_hosts", "keepalives",
        "keepalives_idle", "keepalives_interval", "keepalives_count", "tcp_user_timeout",
        "client_encoding", "krbsrvname", "gsslib", "service", "host", "hostaddr", "port", "dbname",
        "user", "mode", "uri", "cache", "immutable", "nolock", "vfs", "timeout", "check_same_thread",
    }
)  # fmt: skip


def mask(url: str) -> str:
    """The URL with its password, and the value of every query parameter but the connection settings
    of ``SHOWN_QUERY`` (a secret's: ``?password=``, ``sslpassword``, ``passfile``, ``...token``; and
    ``options`` or any parameter not known to hold none), replaced by ***: safe for logs, errors and the
    stored spec."""
    try:
        shown = make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError, TypeError):
        return "<unparseable storage URL>"

    def param(m: re.Match[str]) -> str:
        name = unquote(m.group(1))
        hidden = secret_name(name) or name.lower() not in SHOWN_QUERY
        return f"{m.group(1)}=***" if hidden and m.group(2) else m.group(0)

    return _QUERY_PARAM.sub(param, shown)


#: the longest one connection attempt to a database server may take (a black-holed address, a server
#: that accepts the connection and never answers): it fails, and is retried as transient
CONNECT_TIMEOUT_S = 10
#: psycopg's (libpq's) shortest connect timeout: a shorter one is taken as 2 s
MIN_CONNECT_TIMEOUT_S = 2


def env_number(name: str, default: float, low: float, high: float, *, whole: bool = False) -> float:
    """The number in environment variable ``name`` (``default`` when unset or blank), from ``low`` to
    ``high`` (a whole number when ``whole``); InputError (exit 2) naming the variable otherwise: a
    mistyped value is refused before any storage is opened, never a traceback, and never NaN or
    infinity (an infinite retry window would wait for good)."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    kind = "a whole number" if whole else "a number"
    bad = InputError(f"{name}={raw[:40]!r}: give {kind} from {low:g} to {high:g}")
    try:
        value = float(raw) if not whole else float(int(raw))
    except (ValueError, OverflowError):
        raise bad from None
    if not math.isfinite(value) or not low <= value <= high:
        raise bad
    return value


#: the longest retry window accepted (a day)
MAX_RETRY_S = 86_400.0


def retry_window_s() -> float:
    """How long a database that is away (a restart, a failover) is waited for, start-up included:
    NOVA_STORAGE_RETRY_S, default 300 s, 0 to a day (``db.storage_retry_s``)."""
    return env_number("NOVA_STORAGE_RETRY_S", 300.0, 0.0, MAX_RETRY_S)


def connect_timeout() -> int:
    """Seconds one connection attempt may take: CONNECT_TIMEOUT_S, and no longer than the retry window
    (NOVA_STORAGE_RETRY_S; at least psycopg's 2 s), so that every command gives up about when its
    window ends, not a whole attempt later (10 s attempts in a 5 s window)."""
    window = retry_window_s()
    if window <= 0:
        return CONNECT_TIMEOUT_S
    return max(MIN_CONNECT_TIMEOUT_S, min(CONNECT_TIMEOUT_S, math.ceil(window)))


def engine_kwargs(url: URL) -> dict[str, Any]:
    """``pool_pre_ping`` and a bounded connection attempt (``connect_timeout``) on database servers
    (Optuna only sets the first, and only for MySQL); a 60 s lock wait on SQLite."""
    if is_sqlite(url):
        return {"connect_args": {"timeout": 60}}
    if url.get_backend_name() == "postgresql":
        return {"pool_pre_ping": True, "connect_args": {"connect_timeout": connect_timeout()}}
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


def check_sqlite_file(url: str) -> None:
    """A SQLite URL whose path is here but is no database file (a FIFO, a device, a socket, a
    directory) is refused (SpecError, exit 2) before anything is opened or locked: SQLite would fail
    on it after nova had made the lock file beside it, and a FIFO could block the open."""
    from nova_search.files import special_file

    path = sqlite_path(url)
    if path is None or path.startswith("file:"):
        return
    kind = special_file(path)
    if kind is not None:
        raise SpecError(
            f"storage {mask(url)}: {path} is {kind}, not a SQLite database file; give a file path "
            "(sqlite:///nova.db) or a PostgreSQL URL"
        )


def open_engine(url: str, **kwargs: Any) -> Engine:
    """An engine with ``pool_pre_ping`` and a bounded connection attempt (``connect_timeout``) on
    servers, and a 60 s lock timeout on SQLite."""
    parsed = parse(url)
    check_sqlite_file(url)
    for key, value in engine_kwargs(parsed).items():
        kwargs.setdefault(key, value)
    try:
        return create_engine(parsed, **kwargs)
    except (ArgumentError, ImportError, ValueError, TypeError) as e:
        raise StorageError(f"cannot open storage {mask(url)}: {type(e).__name__}") from None
