"""What a trial runs with: its inputs, fixed for the trial (``TrialContext``: the spec, the stage, the
host's facts, where things go, and the ``Slot`` it runs on), and its server with what was measured on it
so far (``Measurement``), which the sweep fills and confirmation extends. Also the two outlets a trial
reports through: the ``Reporter`` (progress lines) and the ``LevelSink`` (nova's tables)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import optuna

from nova_search.engine.config import EngineConfig
from nova_search.engine.server import Server
from nova_search.measure.metrics import LevelResult
from nova_search.search.rules import Facts
from nova_search.spec import StudySpec
from nova_search.trial.slot import Slot


class Reporter(Protocol):
    def trial_started(self, number: int, label: str) -> None: ...
    def phase(self, number: int, text: str) -> None: ...
    def trial_finished(self, number: int, state: str, detail: str) -> None: ...


class NullReporter:
    def trial_started(self, number: int, label: str) -> None:
        pass

    def phase(self, number: int, text: str) -> None:
        pass

    def trial_finished(self, number: int, state: str, detail: str) -> None:
        pass


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


#: records a level measured again on the trial's server (its windows so far, the engine's last sample)
RecordLevel = Callable[[LevelResult, dict[str, float]], None]


@dataclass
class Measurement:
    """The trial's server and what it measured: per level, its windows in sweep order (the sweep
    fills them, confirmation adds its own), where its request records go, its timing, and where a
    level goes once measured (``record_level``: nova's tables)."""

    server: Server
    requests_path: Path
    timing: dict[str, float]
    record_level: RecordLevel
    by_level: dict[int, list[LevelResult]] = field(default_factory=dict)
