"""The project's exceptions, one tree, and the exit codes they end in: ``ExitCode`` is the one table.
The CLI is the only place that turns an error into its code (``cli._common.NovaGroup``), by the
error's ``exit_code``.

NovaError                  1  failed: an error with no more specific kind (e.g. a file not writable)
+-- InputError             2  bad input: a flag, a file, a trial that cannot be used (names the flag)
|   +-- SpecError          2  the spec or a --set override is invalid (names the field path)
|   +-- StudyError         2  the named study is missing, not a nova study, or exists already
|                             (also a StorageError, for code that catches those)
+-- NothingQualifies       4  the study holds no answer: no feasible trial, nothing meets --where,
|                             nothing to deploy
+-- StorageError           5  the storage is unreachable or unusable (password masked)
+-- EngineError            1  the engine could not be located or set up
+-- TrialFailure           -  one trial failed (boot, crash, timeout, error budget); becomes an Optuna
                              FAIL, never an exit code
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Every exit code of ``nova-search``; docs/commands.md#exit-codes shows this table.

    A script tells "the study has no answer" (4) from "the storage is down" (5) by the code alone."""

    #: done; for a command that reads an answer (best, export), it found one
    OK = 0
    #: an unexpected error (a traceback: a bug to report) or a failure of no more specific kind
    FAILED = 1
    #: bad input: a flag, the spec, an unknown study, a trial that cannot be used (a PRUNED or FAIL trial
    #: that never launched a server). Nothing was written
    BAD_INPUT = 2
    #: ``run``: every trial of the study failed or was pruned; nothing was measured
    NOTHING_MEASURED = 3
    #: the study holds no answer: no feasible COMPLETE trial, no trial meets ``best --where``, no
    #: policy to export
    NOTHING_QUALIFIES = 4
    #: the storage is unreachable (down, refused, timed out after the retry window) or unusable (not a
    #: URL, no such database file, no tables, another schema revision)
    STORAGE = 5
    #: interrupted (Ctrl-C, SIGTERM): the running trial was stopped and recorded as FAIL
    INTERRUPTED = 130


class NovaError(Exception):
    """Base class of every error nova-search raises on purpose."""

    exit_code: ExitCode = ExitCode.FAILED


class InputError(NovaError):
    """Bad input: the message names the flag or file and what would be valid."""

    exit_code = ExitCode.BAD_INPUT


class SpecError(InputError):
    """The study spec is invalid. The message names the field path and what would be valid."""


class NothingQualifies(NovaError):
    """The study was read and holds no answer to the question: no feasible COMPLETE trial, no trial
    meets the conditions, nothing to deploy. Not a failure of nova-search or of the storage."""

    exit_code = ExitCode.NOTHING_QUALIFIES


class StorageError(NovaError):
    """Storage cannot be reached or used. Messages never contain a password.
    ``transient``: the cause was a lost connection, worth retrying (``db.retrying`` does)."""

    exit_code = ExitCode.STORAGE
    transient: bool = False


class StudyError(InputError, StorageError):
    """The storage answered, but the named study is not there, is not a nova study, or (``create``)
    exists already: bad input. Still a ``StorageError`` (never transient) for code that catches those."""

    exit_code = ExitCode.BAD_INPUT


class EngineError(NovaError):
    """The engine cannot be launched at all (interpreter missing, bad command)."""


class TrialFailure(NovaError):
    """A trial failed for a classified reason; optuna records it as FAIL and the study carries on.

    ``reason`` is one of: ``oom``, ``unsupported``, ``crash``, ``timeout``, ``errors``, ``interrupted``,
    ``indeterminate`` (an objective on the capacity search's figures, whose capacity is indeterminate).
    """

    def __init__(self, reason: str, message: str, log_tail: str = "") -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message
        self.log_tail = log_tail
