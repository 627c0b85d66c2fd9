"""What a trial runs with: its inputs, fixed for the trial (``TrialContext``: the spec, the stage, the
host's facts, where things go, and the ``Slot`` it runs on), and its server with what was measured on it
so far (``Measurement``), which the sweep fills and confirmation extends. Also the two outlets a trial
reports through: the ``Reporter`` (progress: the terminal's display, or the JSON event stream; a trial's
stages report through it bound to the trial, ``TrialReporter``) and the ``LevelSink`` (nova's tables)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import optuna

from nova_search.engine.server import Server
from nova_search.knobs import EngineConfig
from nova_search.measure.metrics import LevelResult
from nova_search.search.rules import Facts
from nova_search.spec import StudySpec
from nova_search.trial.slot import Slot


@dataclass(frozen=True)
class TrialEnd:
    """How a trial ended, as told to the study: what a reporter prints or emits."""

    number: int
    #: COMPLETE, PRUNED or FAIL
    state: str
    #: the trial's summary (COMPLETE) or "reason: message"
    detail: str
    values: tuple[float, ...] | None = None
    reason: str | None = None
    #: whether it meets every constraint (a COMPLETE trial); False for any other state
    feasible: bool = False
    #: whether its server was launched (False: refused by the compatibility table)
    launched: bool = True


class Reporter(Protocol):
    """Progress of a worker and its trials. The worker loop calls ``budget`` (at each ask),
    ``level_measured`` (each stored level) and ``trial_finished`` (after the tell); the trial calls the
    rest as it goes. Calls may come from several slot threads at once."""

    def budget(self, used: int, total: int, refused: int) -> None: ...
    def trial_started(self, number: int, label: str, params: dict[str, Any] | None = None) -> None: ...
    def phase(self, number: int, text: str) -> None: ...
    def level_started(
        self, number: int, index: int, count: int, concurrency: int, requests: int | None
    ) -> None: ...
    def requests_done(self, number: int, done: int) -> None: ...
    def level_measured(self, number: int, level: LevelResult) -> None: ...
    def trial_finished(self, end: TrialEnd) -> None: ...
    def waiting(self, running: int) -> None: ...


class NullReporter:
    """Reports nothing; a reporter may subclass it and override what it shows."""

    def budget(self, used: int, total: int, refused: int) -> None:
        pass

    def trial_started(self, number: int, label: str, params: dict[str, Any] | None = None) -> None:
        pass

    def phase(self, number: int, text: str) -> None:
        pass

    def level_started(
        self, number: int, index: int, count: int, concurrency: int, requests: int | None
    ) -> None:
        pass

    def requests_done(self, number: int, done: int) -> None:
        pass

    def level_measured(self, number: int, level: LevelResult) -> None:
        pass

    def trial_finished(self, end: TrialEnd) -> None:
        pass

    def waiting(self, running: int) -> None:
        pass


@dataclass(frozen=True)
class TrialReporter:
    """The worker's ``Reporter`` bound to one trial: what the trial's stages report through."""

    reporter: Reporter
    number: int

    def started(self, label: str, params: dict[str, Any] | None = None) -> None:
        self.reporter.trial_started(self.number, label, params)

    def phase(self, text: str) -> None:
        self.reporter.phase(self.number, text)

    def level_started(self, index: int, count: int, concurrency: int, requests: int | None) -> None:
        self.reporter.level_started(self.number, index, count, concurrency, requests)

    def requests_done(self, done: int) -> None:
        self.reporter.requests_done(self.number, done)


class LevelSink(Protocol):
    """Where each measured level goes besides the trial's attributes (nova's tables)."""

    def record(
        self,
        *,
        trial: optuna.Trial,
        level: LevelResult,
        engine_metrics: dict[str, float],
        argv: list[str],
        engine_version: str | None,
        gpus: tuple[int, ...],
    ) -> None: ...


class NullSink:
    def record(self, **kwargs: Any) -> None:
        pass


@dataclass(frozen=True)
class TrialContext:
    spec: StudySpec
    study_name: str
    facts: Facts
    artifacts_root: Path
    #: the GPU group the trial runs on, its running servers and its resident leader (confirm)
    slot: Slot = field(default_factory=Slot)
    worker: str = field(default_factory=socket.gethostname)
    reporter: Reporter = field(default_factory=NullReporter)
    sink: LevelSink = field(default_factory=NullSink)
    #: set when the worker is interrupted: running trials end FAIL "interrupted"
    cancel: threading.Event = field(default_factory=threading.Event)
    storage_retry_s: float = 300.0
    #: the stage this trial belongs to (spec.stages) and, in the speculative stage, the tuned
    #: configuration it builds on (also what a "tuned" baseline trial runs)
    stage: str = "joint"
    base_config: EngineConfig | None = None
    #: an Optuna artifact store (``artifacts.filesystem_store``): request records and the server log
    #: go there as the trial's artifacts; None: the files stay in artifacts_root only
    artifact_store: Any = None

    def reporter_for(self, trial: optuna.Trial) -> TrialReporter:
        """The reporter, bound to ``trial``."""
        return TrialReporter(self.reporter, trial.number)


#: records a level measured again on the trial's server (its windows so far, the engine's last sample)
RecordLevel = Callable[[LevelResult, dict[str, float]], None]


@dataclass
class Measurement:
    """The trial's server and what it measured: per level, its windows in sweep order (the sweep
    fills them, confirmation adds its own), where its request records go, its timing, where a
    level goes once measured (``record_level``: nova's tables), and the capacity search's figures."""

    server: Server
    requests_path: Path
    timing: dict[str, float]
    record_level: RecordLevel
    by_level: dict[int, list[LevelResult]] = field(default_factory=dict)
    #: the trial's figures once its capacity search has run (``Capacity.figures``); empty before
    figures: dict[str, float | None] = field(default_factory=dict)
