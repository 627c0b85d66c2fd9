"""Storage calls through a database restart or failover: transient errors (``errors.TRANSIENT``, or
a ``StorageError`` made of one) are retried with backoff for a window, then raised as
``StorageError``. Every storage call on a worker's path goes through ``retrying``: start-up, ask,
suggest, attributes, heartbeats, tell, and the closing summary.

The retry loop is tenacity's; nova supplies what tenacity cannot know: which errors are transient
(``failures.is_transient``), the one warning per outage, and the final one-line ``StorageError``.

The policy (docs/deploy/cluster.md, "Connections"):

- **fatal, at once**: a connection refused for good (bad password, no such database or role,
  pg_hba.conf: ``failures.fatal_connect``) is never retried: the worker exits 5 naming what is wrong.
- **transient, with backoff**: a lost or refused connection (the server restarting or shutting down,
  connection refused, "too many clients") is retried for the window, waiting 0.25 s doubling to 5 s,
  each wait spread at random over its upper half (jitter: 200 workers refused together must not
  all come back in the same millisecond);
- **holding nothing while waiting**: before each wait, every pooled connection of the process is
  closed (``connections.release``), so a worker waiting for a connection slot frees the ones it had.
  (Before this, 4 workers on a server of 12 connections each kept theirs while retrying for more,
  and none ran a trial.)"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from typing import NoReturn, TypeVar

from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_delay, wait_exponential

from nova_search.db._url import mask, retry_window_s
from nova_search.db.connections import release
from nova_search.db.failures import TRANSIENT, is_transient, storage_error
from nova_search.errors import StorageError

log = logging.getLogger("nova_search")
T = TypeVar("T")

#: the backoff: 0.25 s, doubling, at most 5 s between attempts (never past the window's end), each
#: wait spread over [JITTER * wait, wait]
FIRST_WAIT_S = 0.25
MAX_WAIT_S = 5.0
JITTER = 0.5


def _spread(wait_s: float) -> float:
    """A wait spread at random over its upper half, so that workers refused together come back apart."""
    return wait_s * random.uniform(JITTER, 1.0)  # noqa: S311 - spreading waits, not a secret


def storage_retry_s() -> float:
    """How long a worker waits for a database that is away (a restart, a failover), start-up
    included: NOVA_STORAGE_RETRY_S, default 300 s (it bounds each connection attempt too:
    ``_url.connect_timeout``)."""
    return retry_window_s()


class _Final(Exception):
    """What ``fatal`` made of an error: carried out of tenacity unretried, raised by ``retrying``."""

    def __init__(self, error: StorageError) -> None:
        super().__init__(str(error))
        self.error = error


def _worth_retrying(e: BaseException) -> bool:
    """A lost connection: a transient ``StorageError``, or one of ``TRANSIENT`` that
    ``is_transient`` accepts (a query the database refused is not)."""
    if isinstance(e, StorageError):
        return e.transient
    return isinstance(e, TRANSIENT) and is_transient(e)


def retrying(
    fn: Callable[[], T],
    window_s: float,
    doing: str,
    *,
    url: str = "",
    fatal: Callable[[BaseException], StorageError | None] | None = None,
) -> T:
    """Call ``fn``; retry transient storage errors with backoff (0.25 s doubling to 5 s) for up to
    ``window_s`` seconds. ``fatal(e)`` may turn an error into one that is not retried (a missing
    table, say). Non-transient errors pass through unchanged."""

    def attempt() -> T:
        try:
            return fn()
        except (*TRANSIENT, StorageError) as e:
            if isinstance(e, StorageError) and not e.transient:
                raise
            if fatal is not None and (final := fatal(e)) is not None:
                raise _Final(final) from None
            raise

    def before_sleep(state: RetryCallState) -> None:
        release()  # a worker waiting for the database holds no connection
        if state.attempt_number == 1:  # once per outage: the final error says how many tries it took
            error = state.outcome.exception() if state.outcome else None
            log.warning(
                "cannot %s %s (%s); retrying for up to %g s (NOVA_STORAGE_RETRY_S)",
                doing,
                mask(url) if url else "the storage",
                type(error).__name__,
                window_s,
            )

    def give_up(state: RetryCallState) -> NoReturn:
        error = state.outcome.exception() if state.outcome else None
        assert error is not None  # tenacity gives up only on a failed attempt
        after = f"after {state.attempt_number} attempts over {window_s:g} s" if window_s > 0 else ""
        raise storage_error(url, doing, error, after) from None

    backoff = wait_exponential(multiplier=FIRST_WAIT_S, max=MAX_WAIT_S)

    def wait(state: RetryCallState) -> float:  # the last wait ends with the window, not past it
        return max(0.0, min(_spread(backoff(state)), window_s - (state.seconds_since_start or 0.0)))

    try:
        return Retrying(
            retry=retry_if_exception(_worth_retrying),
            stop=stop_after_delay(window_s),
            wait=wait,
            before_sleep=before_sleep,
            retry_error_callback=give_up,
        )(attempt)
    except _Final as f:
        raise f.error from None
