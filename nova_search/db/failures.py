"""The one wrapper that turns a storage failure into ``StorageError``: the URL masked, the driver's
message never shown (it can echo the URL, and with it the password), a hint where one helps."""

from __future__ import annotations

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


def is_transient(e: BaseException) -> bool:
    """A lost connection (directly, or wrapped by Optuna), not a query the database refused. The
    first call on a session whose connection was cut raises ``PendingRollbackError``; the next one
    reconnects, so it is transient too."""
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
