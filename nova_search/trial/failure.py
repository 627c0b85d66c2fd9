"""How a trial fails: the taxonomy (a configuration that cannot launch, the host's fault, the deadline,
an interrupt), the one ``classify`` that maps whatever a trial raised to a ``Failure``, and how a
failure is recorded on the trial.

A configuration the compatibility table refuses, or whose server never came up for a reason of its own
(out of memory, a refused flag: ``UNLAUNCHABLE_REASONS``), ends PRUNED and infeasible, so the sampler
avoids its neighbours; the host's trouble (``HOST_ERRNOS``: a full disk, say) ends FAIL ``host``; a
trial past its deadline ends FAIL ``timeout``, an interrupted one FAIL ``interrupted``; any other
classified failure (a crash, an error budget) ends FAIL with its reason.
"""

from __future__ import annotations

import errno
import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import optuna

from nova_search import schema
from nova_search.db import retrying
from nova_search.engine.server import tail
from nova_search.errors import TrialFailure
from nova_search.trial.deadline import TrialDeadline
from nova_search.trial.window import write_attr

#: how a server that never came up failed, when the configuration is to blame (the same launch fails
#: the same way again): out of memory, or a flag or combination the engine refuses. Such a trial ends
#: PRUNED with the reason, and infeasible (UNLAUNCHABLE_CONSTRAINT = 1), like a configuration the
#: compatibility table refuses; any other failure (a crash, a timeout) ends FAIL
UNLAUNCHABLE_REASONS = ("oom", "unsupported")
UNLAUNCHABLE_CONSTRAINT = "launchable"

#: errno values that say the host is in trouble, not the configuration: a full or read-only disk, a
#: quota, no file descriptors left, an I/O error, a folder this user may not write
HOST_ERRNOS = frozenset(
    {
        errno.ENOSPC,
        errno.EROFS,
        errno.EDQUOT,
        errno.EMFILE,
        errno.ENFILE,
        errno.EIO,
        errno.EACCES,
        errno.EPERM,
    }
)
#: bytes written (and synced, then removed) in the trial's folder before its boot, and again after a
#: failure, to tell a full disk from a configuration that fails
HOST_PROBE_BYTES = 1 << 20


class HostFailure(TrialFailure):
    """The host failed the trial (``HOST_ERRNOS``), not its configuration: the worker records it as
    FAIL ``host``, queues the trial again (it does not count toward the budget) and stops."""

    def __init__(self, message: str, log_tail: str = "") -> None:
        super().__init__("host", message, log_tail)


def host_errno(e: BaseException) -> str | None:
    """``strerror (ENAME)`` when ``e`` is an OSError of the host's (``HOST_ERRNOS``), else None."""
    if isinstance(e, OSError) and e.errno in HOST_ERRNOS:
        return f"{os.strerror(e.errno)} ({errno.errorcode[e.errno]})"
    return None


def host_problem(folder: Path) -> str | None:
    """What is wrong with the host where a trial writes (``folder``), None when nothing is: the folder
    is made, ``HOST_PROBE_BYTES`` written to a file in it and synced, the file removed."""
    tmp = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".nova-probe-", dir=folder)
        with os.fdopen(fd, "wb") as f:
            f.write(bytes(HOST_PROBE_BYTES))
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:
        why = host_errno(e)
        return None if why is None else f"cannot write in {folder}: {why}"
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
    return None


def log_tail(log_path: Path) -> str:
    """The server log's tail; empty when it cannot be read (a host problem)."""
    try:
        return tail(log_path)
    except OSError:
        return ""


@dataclass(frozen=True)
class Failure:
    """A trial's failure, classified: what is recorded on the trial, and what the trial raises then."""

    reason: str
    message: str
    #: the server log's tail, recorded with it
    log_tail: str
    #: FAIL, or PRUNED: the configuration cannot launch (it is also marked infeasible)
    state: str
    #: what the trial raises once it is recorded: a TrialFailure (FAIL), optuna.TrialPruned (PRUNED),
    #: or the exception itself (an interrupt)
    raised: BaseException


def classify(
    e: BaseException, *, log_path: Path, cancel: threading.Event, deadline: TrialDeadline, booted: bool
) -> Failure | None:
    """What the exception ``e`` a trial raised means (``booted``: its server came up; ``log_path``: its
    server log, whose folder is probed for the host's trouble), or None when it is not a trial's
    failure and goes up as it is (an error of nova's own, say).

    - a TrialFailure is the host's when the host probe finds trouble, ``interrupted`` when the worker
      is, ``timeout`` when the deadline expired; it is PRUNED when the server never came up for a
      reason of the configuration's (``UNLAUNCHABLE_REASONS``), else FAIL;
    - an interrupt (KeyboardInterrupt) is FAIL ``interrupted``, and goes up as it came;
    - an OSError of the host's (``HOST_ERRNOS``) is FAIL ``host``, unless the deadline expired;
    - anything else, once the deadline has expired, is what the killed server made of the step it was
      in (a cut connection, say): FAIL ``timeout``."""
    if isinstance(e, TrialFailure):
        if not isinstance(e, HostFailure) and not cancel.is_set():
            problem = host_problem(log_path.parent)  # a full disk fails servers as a bad flag would
            if problem is not None:
                e = HostFailure(f"{problem} (the trial saw {e.reason}: {e.message})", e.log_tail)
        if cancel.is_set():
            e = TrialFailure("interrupted", "the worker was interrupted", e.log_tail)
        elif deadline.expired.is_set() and e.reason != "timeout":
            e = TrialFailure("timeout", f"{deadline.failure().message} ({e.reason}: {e.message})", e.log_tail)
        state = "PRUNED" if not booted and e.reason in UNLAUNCHABLE_REASONS else "FAIL"
        raised = optuna.TrialPruned(f"{e.reason}: {e.message}") if state == "PRUNED" else e
        return Failure(e.reason, e.message, e.log_tail or log_tail(log_path), state, raised)
    if isinstance(e, KeyboardInterrupt):
        return Failure("interrupted", "the worker was interrupted", tail(log_path), "FAIL", e)
    if isinstance(e, OSError):
        why = host_errno(e)
        if why is None or deadline.expired.is_set():
            return None
        host = HostFailure(f"{type(e).__name__}: {why}: {e.filename or ''}".rstrip(": "))
        return Failure(host.reason, host.message, log_tail(log_path), "FAIL", host)
    if isinstance(e, Exception) and deadline.expired.is_set():
        timeout = deadline.failure()
        return Failure(timeout.reason, timeout.message, tail(log_path), "FAIL", timeout)
    return None


def record_failure(
    trial: optuna.Trial, reason: str, message: str, log_tail: str | None, retry_s: float
) -> None:
    """Why a trial ended other than COMPLETE: its reason, message, summary and (when there is one) the
    server log's tail (the worker loop reports the trial's end once it is told)."""
    write_attr(trial, schema.REASON, reason, retry_s)
    write_attr(trial, schema.MESSAGE, message, retry_s)
    if log_tail is not None:
        write_attr(trial, schema.LOG_TAIL, log_tail[-4000:], retry_s)
    write_attr(trial, schema.SUMMARY, short(f"{reason}: {message}"), retry_s)


def unlaunchable(trial: optuna.Trial, retry_s: float) -> None:
    """Mark a configuration that cannot run as infeasible (``launchable`` = 1), so that the sampler
    learns from it: Optuna's TPE reads COMPLETE and PRUNED trials only (a FAIL trial is invisible to
    it), and puts an infeasible one among the bad trials whose neighbourhood it avoids."""
    retrying(lambda: trial.set_constraint(UNLAUNCHABLE_CONSTRAINT, 1.0), retry_s, "set_constraint")


def short(text: str, limit: int = 200) -> str:
    """A one-line summary short enough for the dashboard's trial table."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
