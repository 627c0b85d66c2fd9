"""The project's exceptions, one tree. The CLI is the only place that turns them into exit codes.

NovaError
+-- SpecError            the spec or a --set override is invalid (names the field path)
+-- StorageError         the storage URL is unreachable or the study is missing (password masked)
+-- EngineError          the engine could not be located or set up
+-- TrialFailure         one trial failed (boot, crash, timeout, error budget); becomes an Optuna FAIL
"""

from __future__ import annotations


class NovaError(Exception):
    """Base class of every error nova-search raises on purpose."""


class SpecError(NovaError):
    """The study spec is invalid. The message names the field path and what would be valid."""


class StorageError(NovaError):
    """Storage cannot be reached or the study does not exist. Messages never contain a password.
    ``transient``: the cause was a lost connection, worth retrying (``db.retrying`` does)."""

    transient: bool = False


class EngineError(NovaError):
    """The engine cannot be launched at all (interpreter missing, bad command)."""


class TrialFailure(NovaError):
    """A trial failed for a classified reason; optuna records it as FAIL and the study carries on.

    ``reason`` is one of: ``oom``, ``unsupported``, ``crash``, ``timeout``, ``errors``, ``interrupted``.
    """

    def __init__(self, reason: str, message: str, log_tail: str = "") -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message
        self.log_tail = log_tail
