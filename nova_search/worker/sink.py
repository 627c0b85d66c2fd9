"""Where a trial's measured levels go on a worker: ``TableSink`` writes each one to nova's table
``nova_level_result`` (``db.LevelStore``: idempotent, retried across database restarts) with the
worker's host and GPUs, then tells the reporter."""

from __future__ import annotations

from dataclasses import dataclass, field

import optuna

from nova_search.db import LevelStore, trial_id
from nova_search.measure.metrics import LevelResult
from nova_search.trial.context import NullReporter, Reporter


@dataclass
class TableSink:
    """Writes every measured level to nova_level_result (idempotent, retried across DB restarts)."""

    store: LevelStore
    study_name: str
    host: str
    device_name: str | None
    #: told of each level once it is stored
    reporter: Reporter = field(default_factory=NullReporter)

    def record(
        self,
        *,
        trial: optuna.Trial,
        level: LevelResult,
        engine_metrics: dict[str, float],
        argv: list[str],
        engine_version: str | None,
        gpus: tuple[int, ...],
    ) -> None:
        self.store.record(
            trial_id=trial_id(trial),
            study_name=self.study_name,
            trial_number=trial.number,
            level=level,
            engine_metrics=engine_metrics,
            worker_host=self.host,
            gpu_ids=gpus,
            gpu_name=self.device_name,
            engine_version=engine_version,
            argv=argv,
        )
        self.reporter.level_measured(trial.number, level)
