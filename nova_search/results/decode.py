"""Optuna's records -> the read side's records: ``trial_result`` decodes one trial through
``schema``, ``study_results`` one open Optuna study. Pure given what storage returned."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import optuna
from optuna.trial import FrozenTrial

from nova_search import schema
from nova_search.db import count_toward_budget
from nova_search.measure.feasibility import feasible
from nova_search.measure.metrics import LevelResult
from nova_search.measure.objectives import Objective
from nova_search.results.select import direction_of
from nova_search.results.trials import StudyResults, TrialResult, trial_key


def objectives_of(study: optuna.Study) -> tuple[Objective, ...]:
    """The study's objectives from its metric names (``metric@at``) and directions."""
    names = study.metric_names or [f"value{i}@best" for i in range(len(study.directions))]
    out = []
    for i, (name, d) in enumerate(zip(names, study.directions, strict=True)):
        direction = direction_of(d)
        metric, _, at_text = name.partition("@")
        out.append(Objective(metric, direction, int(at_text) if at_text.isdigit() else "best", i))
    return tuple(out)


def _levels_from_rows(rows: Sequence[Mapping[str, Any]]) -> tuple[LevelResult, ...]:
    out = [
        LevelResult.from_dict(r["profile"])
        for r in rows
        if isinstance(r.get("profile"), dict) and "concurrency" in r["profile"]
    ]
    return tuple(sorted(out, key=lambda lv: lv.concurrency))


def trial_result(
    t: FrozenTrial, rows: Sequence[Mapping[str, Any]] = (), *, study: str = "", stage: str = "joint"
) -> TrialResult:
    """Decode one Optuna trial (and its rows of ``nova_level_result``, which fill in the levels, argv,
    engine version and device when the trial's attributes lack them)."""
    attrs = t.user_attrs
    argv = schema.ARGV.read(attrs) or next((tuple(map(str, r["argv"])) for r in rows if r.get("argv")), ())
    version = schema.ENGINE_VERSION.read(attrs) or next(
        (str(r["engine_version"]) for r in rows if r.get("engine_version")), None
    )
    constraints = {str(k): float(v) for k, v in t.constraints.items()}
    state = t.state.name
    values = tuple(float(v) for v in t.values) if state == "COMPLETE" and t.values is not None else None
    retry_of = t.system_attrs.get(schema.RETRY_OF)
    return TrialResult(
        number=t.number,
        state=state,
        role=schema.role_of(attrs),
        params=dict(t.params),
        distributions={k: optuna.distributions.distribution_to_json(d) for k, d in t.distributions.items()},
        config=schema.CONFIG.read(attrs),
        values=values,
        constraints=constraints,
        feasible=feasible(t),
        levels=schema.LEVELS.read(attrs) or _levels_from_rows(rows),
        argv=argv,
        engine_version=version,
        timing=schema.TIMING.read(attrs) or {},
        reason=schema.REASON.read(attrs),
        message=schema.MESSAGE.read(attrs),
        log_tail=schema.LOG_TAIL.read(attrs) or None,
        worker=schema.WORKER.read(attrs),
        datetime_start=t.datetime_start,
        datetime_complete=t.datetime_complete,
        retry_of=retry_of if isinstance(retry_of, int) else None,
        windows=schema.REPEATS.read(attrs) or {},
        warnings=schema.WARNINGS.read(attrs) or (),
        device_name=next((str(r["gpu_name"]) for r in rows if r.get("gpu_name")), None),
        reference=schema.REFERENCE.read(attrs),
        study=study,
        stage=stage,
        paired=schema.PAIRED.read(attrs),
        capacity=schema.CAPACITY.read(attrs),
    )


def study_results(
    study: optuna.Study, storage: str, rows: Mapping[int, Sequence[Mapping[str, Any]]] | None = None
) -> StudyResults:
    """``StudyResults`` of one open Optuna study. ``storage`` is the URL to show, masked; ``rows``:
    nova's per-level rows by trial number. Storage errors pass through (the caller wraps them)."""
    frozen = sorted(study.get_trials(deepcopy=False), key=lambda t: t.number)
    attrs = study.user_attrs
    stage = schema.stage_of(attrs)
    rows = rows or {}
    trials = tuple(
        trial_result(t, rows.get(t.number, ()), study=study.study_name, stage=stage) for t in frozen
    )
    return StudyResults(
        study_name=study.study_name,
        storage=storage,
        objectives=objectives_of(study),
        trials=trials,
        front_keys=tuple(trial_key(t.number, stage) for t in study.best_trials),
        spec=schema.SPEC.read(attrs),
        trace=schema.TRACE.read(attrs),
        budget_used=count_toward_budget(frozen),
    )
