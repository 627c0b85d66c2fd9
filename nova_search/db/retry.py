"""Storage calls through a database restart or failover: transient errors (``errors.TRANSIENT``, or
a ``StorageError`` made of one) are retried with backoff for a window, then raised as
``StorageError``. Every storage call on a worker's path goes through ``retrying``: start-up, ask,
suggest, attributes, heartbeats, tell, and the closing summary."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import TypeVar

from nova_search.db._url import mask
from nova_search.db.failures import TRANSIENT, is_transient, storage_error
from nova_search.errors import StorageError

log = logging.getLogger("nova_search")
T = TypeVar("T")


def storage_retry_s() -> float:
    """How long a worker waits for a database that is away (a restart, a failover), start-up
    included: NOVA_STORAGE_RETRY_S, default 300 s."""
    return float(os.environ.get("NOVA_STORAGE_RETRY_S", "300"))


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
    deadline = time.monotonic() + window_s
    delay, attempt = 0.25, 0
    while True:
        attempt += 1
        try:
            return fn()
        except (*TRANSIENT, StorageError) as e:
            if isinstance(e, StorageError) and not e.transient:
                raise
            if fatal is not None and (final := fatal(e)) is not None:
                raise final from None
            if not isinstance(e, StorageError) and not is_transient(e):
                raise
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                after = f"after {attempt} attempts over {window_s:g} s" if window_s > 0 else ""
                raise storage_error(url, doing, e, after) from None
            if attempt == 1:  # once per outage: the final error, if any, says how many tries it took
                log.warning(
                    "cannot %s %s (%s); retrying for up to %g s (NOVA_STORAGE_RETRY_S)",
                    doing,
                    mask(url) if url else "the storage",
                    type(e).__name__,
                    window_s,
                )
            time.sleep(min(delay, remaining))
            delay = min(delay * 2, 5.0)
