"""The one wrapper that turns a storage failure into ``StorageError``: the URL masked, the driver's
message never shown (it can echo the URL, and with it the password), a hint where one helps."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import optuna
from alembic.util import CommandError
from sqlalchemy.exc import (
    DBAPIError,
    InterfaceError,
    OperationalError,
    PendingRollbackError,
    ProgrammingError,
    SQLAlchemyError,
)

from nova_search.db._url import mask
from nova_search.errors import StorageError

#: errors that may be worth retrying: the connection dropped, the server restarted or failed over
TRANSIENT: tuple[type[BaseException], ...] = (
    OperationalError,
    InterfaceError,
    PendingRollbackError,
    optuna.exceptions.StorageInternalError,
)


#: a connection the server refused for a reason no wait fixes (PostgreSQL's FATAL messages as libpq
#: passes them on; psycopg gives no SQLSTATE for a failed connection): what is wrong, and what to do.
#: "too many clients", "the database system is starting up / shutting down", "connection refused"
#: and "terminating connection due to administrator command" are not here: they pass, so they are
#: retried (with backoff, holding no connection: ``db.connections``).
_FATAL_CONNECT: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r'password authentication failed for user "([^"]*)"'),
        'password authentication failed for user "{0}" (check the password in the storage URL or its secret)',
    ),
    (
        re.compile(r'(\w+) authentication failed for user "([^"]*)"'),
        '{0} authentication failed for user "{1}" (check the user and the server\'s pg_hba.conf)',
    ),
    (
        re.compile(r'database "([^"]*)" does not exist'),
        'the database "{0}" does not exist on the server (create it, or fix the database name in the URL)',
    ),
    (
        re.compile(r'role "([^"]*)" does not exist'),
        'the role "{0}" does not exist on the server (create it, or fix the user name in the URL)',
    ),
    (
        re.compile(r'no pg_hba\.conf entry for host "([^"]*)", user "([^"]*)", database "([^"]*)"'),
        'the server\'s pg_hba.conf lets no connection in from host "{0}" as user "{1}" to database "{2}"',
    ),
    (
        re.compile(r"no password supplied"),
        "the server asks for a password and the storage URL gives none",
    ),
)


def fatal_connect(e: BaseException | None) -> str | None:
    """What is wrong, when the server refused the connection for a reason that waiting cannot fix (bad
    password, no such database or role, pg_hba.conf); None otherwise. Looks through Optuna's and
    SQLAlchemy's wrappers to the driver's message, and returns nova's own words, never the message."""
    seen = 0
    while e is not None and seen < 8:
        seen += 1
        if isinstance(e, OperationalError | InterfaceError):
            text = str(getattr(e, "orig", e))
            for pattern, words in _FATAL_CONNECT:
                if m := pattern.search(text):
                    return words.format(*m.groups())
            return None
        e = e.__cause__ or e.__context__
    return None


def is_transient(e: BaseException) -> bool:
    """A lost connection (directly, or wrapped by Optuna), not a query the database refused, nor a
    connection refused for good (``fatal_connect``: bad password, no such database or role). The
    first call on a session whose connection was cut raises ``PendingRollbackError``; the next one
    reconnects, so it is transient too."""
    if fatal_connect(e) is not None:
        return False
    if isinstance(e, optuna.exceptions.StorageInternalError):
        cause = e.__cause__ or e.__context__
        return cause is None or is_transient(cause)
    if isinstance(e, DBAPIError) and e.connection_invalidated:
        return True
    return isinstance(e, OperationalError | InterfaceError | PendingRollbackError)


def _missing_tables(e: BaseException) -> bool:
    text = str(getattr(e, "orig", e)).lower()
    return isinstance(e, ProgrammingError) or "no such table" in text or "does not exist" in text


def storage_error(url: str, doing: str, e: BaseException, after: str = "") -> StorageError:
    """``cannot DOING URL[ AFTER]: Kind (hint)`` for any failure of a storage call."""
    where = (mask(url) if url else "the storage") + (f" {after}" if after else "")
    if isinstance(e, StorageError):
        return e
    if isinstance(e, CommandError):  # alembic's own messages name revisions, never the URL
        return StorageError(f"cannot {doing} {where}: {e}")
    if isinstance(e, RuntimeError) and not isinstance(e, optuna.exceptions.OptunaError):
        # Optuna's schema-compatibility check: its message names versions, not the URL
        return StorageError(f"cannot {doing} {where}: {e}")
    cause = e.__cause__ if isinstance(e, optuna.exceptions.OptunaError) and e.__cause__ else e
    if (fatal := fatal_connect(e)) is not None:
        return StorageError(f"cannot {doing} {where}: {fatal}")
    if _missing_tables(cause):
        hint = " (no Optuna study tables there? check the database name, or create a study first)"
    elif isinstance(cause, OperationalError | InterfaceError | ConnectionError):
        hint = " (is the server up, the URL right?)"
    elif isinstance(cause, ImportError):
        hint = " (is the database driver installed?)"
    else:
        hint = ""
    error = StorageError(f"cannot {doing} {where}: {type(cause).__name__}{hint}")
    error.transient = is_transient(e)
    return error


@contextmanager
def storage_errors(url: str, doing: str) -> Iterator[None]:
    """Inside: any storage failure leaves as ``storage_error(url, doing, e)``."""
    try:
        yield
    except StorageError:
        raise
    except (
        SQLAlchemyError,
        optuna.exceptions.OptunaError,
        CommandError,
        ImportError,
        ValueError,
        TypeError,
        RuntimeError,
        OSError,
    ) as e:
        raise storage_error(url, doing, e) from None
