"""A trial's deadline: how long it may take (``trial_timeout_s``, from the spec) and the timer that
kills its server once that time is up (``TrialDeadline``, a context manager: armed for the body of a
``with``, disarmed when it ends).

A wedged server then fails its requests at once, and the trial ends FAIL ``timeout`` (``failure``
reads ``expired``)."""

from __future__ import annotations

import math
import os
import signal
import threading

from nova_search.engine.server import Server
from nova_search.errors import TrialFailure
from nova_search.loadgen.prompts import prompt_source
from nova_search.loadgen.reference import REFERENCE_PROMPTS
from nova_search.loadgen.replay import TraceSource
from nova_search.spec import SPEED_KEY, StudySpec, TraceArrival


def trial_timeout_s(spec: StudySpec) -> float:
    """How long a trial may take (``sweep.trial_timeout_s``, else derived): twice the worst its plan can
    take with every request at its timeout: two boots and stops (the trial's server and a slot
    leader's), the reference outputs (one request at a time), and at each level the warmup and the
    windows (``ceil(requests / concurrency)`` rounds of requests, or ``duration_s`` plus one timeout;
    a trace replay's: its slice's span at the speed plus a timeout per round of its in-flight cap),
    and each of the capacity search's probes at its worst (one request at a time, or ``duration_s``).
    A wedged server is usually failed long before, by the level's error budget."""
    sweep, engine = spec.sweep, spec.engine
    if sweep.trial_timeout_s is not None:
        return sweep.trial_timeout_s
    timeout = sweep.request_timeout_s
    total = 2 * (engine.boot_timeout_s + engine.stop_timeout_s) + REFERENCE_PROMPTS * timeout
    arrival = spec.workload.arrival
    if isinstance(arrival, TraceArrival):  # a window is its slice's span at the speed, then the stragglers
        source = prompt_source(spec.workload, spec.model)
        assert isinstance(source, TraceSource)
        for c in sweep.concurrency:
            due = source.schedule(c / SPEED_KEY, sweep.requests, sweep.duration_s)
            total += math.ceil(sweep.warmup_requests / arrival.max_in_flight) * timeout
            window = (due[-1] if due else 0.0) + math.ceil(len(due) / arrival.max_in_flight) * timeout
            total += sweep.repeats * window
        return 2 * total
    for c in sweep.concurrency:
        total += math.ceil(sweep.warmup_requests / c) * timeout
        if sweep.requests is not None:
            window = math.ceil(sweep.requests / c) * timeout
        else:
            window = (sweep.duration_s or 0.0) + timeout
        total += sweep.repeats * window
    if spec.capacity is not None:  # a probe warms up in one round, then sends its requests
        if sweep.requests is not None:
            probe = (1 + sweep.requests) * timeout
        else:
            probe = timeout + (sweep.duration_s or 0.0) + timeout
        total += spec.capacity.max_probes * probe
    return 2 * total


class TrialDeadline:
    """Kills the trial's server (its process group) once ``seconds`` have passed inside its ``with``
    block: a wedged server then fails its requests at once, and the trial ends FAIL ``timeout``
    (``expired`` is set). Leaving the block disarms it."""

    def __init__(self, seconds: float, server: Server) -> None:
        self.seconds = seconds
        self.server = server
        self.expired = threading.Event()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> TrialDeadline:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()

    def _expire(self) -> None:
        self.expired.set()
        proc = self.server.proc
        if proc is not None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # stopped (SIGSTOP) processes too; the teardown follows
            except (ProcessLookupError, PermissionError):
                pass

    def failure(self) -> TrialFailure:
        return TrialFailure(
            "timeout",
            f"the trial ran past its deadline of {self.seconds:g} s (sweep.trial_timeout_s): its server "
            "was stopped",
        )
