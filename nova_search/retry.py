"""Retrying storage calls across a database restart or failover: transient errors are retried with
backoff for a window, then raised as StorageError (masked: only the error's class is shown)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

import optuna
from sqlalchemy.exc import InterfaceError, OperationalError

from nova_search.errors import StorageError

log = logging.getLogger("nova_search")
T = TypeVar("T")

_TRANSIENT = (OperationalError, InterfaceError, optuna.exceptions.StorageInternalError)


def retrying(fn: Callable[[], T], window_s: float, what: str) -> T:
    """Call ``fn``, retrying transient storage errors with backoff for up to ``window_s`` seconds."""
    deadline = time.monotonic() + window_s
    delay = 0.5
    while True:
        try:
            return fn()
        except _TRANSIENT as e:
            if time.monotonic() + delay > deadline:
                raise StorageError(
                    f"storage unavailable for {window_s:g} s during {what}: {type(e).__name__}"
                ) from None
            log.warning("storage error during %s (%s); retrying in %.1f s", what, type(e).__name__, delay)
            time.sleep(delay)
            delay = min(delay * 2, 10.0)
