"""Results as plain data: JSON for ``dump`` and ``best``, CSV for spreadsheets and dataframes.

``study_dict`` carries ``schema_version`` (``DUMP_SCHEMA_VERSION``): a consumer checks it before it
reads. Version 2 added ``schema_version``, trial ``key``/``stage``/``study``, ``worker`` as
``{host, gpus}`` and ``client_bound_levels``; version 1 (before) had none of these. ``gpu_time_s``
(``results.cost``: windows, boot, failed_boot, other) was added within version 2: a new key only.

The CSV has one row per trial and measured level: the trial's identity, state, role and configuration
knobs, then the level's concurrency and every ``LevelResult`` metric of it (``metrics.METRIC_NAMES``).
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from nova_search.engine.config import KNOBS
from nova_search.measure.metrics import METRIC_NAMES
from nova_search.measure.objectives import Objective
from nova_search.results.cost import gpu_time
from nova_search.results.trials import StudyResults, TrialResult

DUMP_SCHEMA_VERSION = 2


def trial_dict(trial: TrialResult, objectives: Sequence[Objective] = ()) -> dict[str, Any]:
    """A JSON-ready summary of one trial: key, role, state, values by objective name, params,
    config, constraints, argv and deployable argv, engine version."""
    values: dict[str, float] | None = None
    if trial.values is not None:
        names = [o.name for o in objectives] or [f"value{i}" for i in range(len(trial.values))]
        values = dict(zip(names, trial.values, strict=False))
    return {
        "number": trial.number,
        "key": trial.key,
        "stage": trial.stage,
        "study": trial.study,
        "state": trial.state,
        "role": trial.role,
        "feasible": trial.feasible,
        "values": values,
        "params": trial.params,
        "config": trial.config.as_dict() if trial.config else None,
        "constraints": trial.constraints,
        "argv": list(trial.argv),
        "deployable_argv": list(trial.deployable_argv),
        "engine_version": trial.engine_version,
        "client_bound_levels": list(trial.client_bound_levels),
    }


def study_dict(results: StudyResults) -> dict[str, Any]:
    """The whole study as plain data (``nova-search dump``)."""
    trials = []
    for t in results.trials:
        d = trial_dict(t, results.objectives)
        d.update(
            levels=[lv.as_dict() for lv in t.levels],
            windows={str(c): list(ws) for c, ws in t.windows.items()},
            timing=t.timing,
            duration_s=t.duration_s,
            datetime_start=t.datetime_start,
            datetime_complete=t.datetime_complete,
            reason=t.reason,
            message=t.message,
            warnings=list(t.warnings),
            worker=t.worker.as_dict() if t.worker else None,
            device_name=t.device_name,
            retry_of=t.retry_of,
            paired=t.paired.as_dict() if t.paired else None,
        )
        trials.append(d)
    return {
        "schema_version": DUMP_SCHEMA_VERSION,
        "study": results.study_name,
        "storage": results.storage,
        "stages": list(results.stages),
        "objectives": [o.name for o in results.objectives],
        "directions": [o.direction for o in results.objectives],
        "budget": results.budget,
        "budget_used": results.budget_used,
        "pareto": list(results.front_keys),
        "gpu_time_s": gpu_time(results).seconds(),
        "spec": results.spec,
        "trials": trials,
    }


CSV_TRIAL_COLUMNS = ("study", "key", "number", "stage", "state", "role", "feasible", "spec_method", "spec_k")
CSV_COLUMNS: tuple[str, ...] = (
    *CSV_TRIAL_COLUMNS,
    *(k.name for k in KNOBS if k.kind != "json"),
    "concurrency",
    *METRIC_NAMES,
)


def csv_rows(results: StudyResults) -> list[dict[str, Any]]:
    """One row per trial and measured level (``CSV_COLUMNS``); a trial without levels gets none."""
    rows = []
    for t in results.trials:
        config = t.config.as_dict() if t.config else {}
        spec = t.config.speculative if t.config else None
        base = {
            "study": t.study,
            "key": t.key,
            "number": t.number,
            "stage": t.stage,
            "state": t.state,
            "role": t.role,
            "feasible": t.feasible,
            "spec_method": spec.method if spec else "none",
            "spec_k": spec.num_speculative_tokens if spec else None,
            **{k.name: config.get(k.name) for k in KNOBS if k.kind != "json"},
        }
        for lv in t.levels:
            d = lv.as_dict()
            rows.append(base | {"concurrency": lv.concurrency} | {m: d.get(m) for m in METRIC_NAMES})
    return rows


def to_csv(results: StudyResults) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(CSV_COLUMNS), lineterminator="\n")
    writer.writeheader()
    for row in csv_rows(results):
        writer.writerow({k: ("" if v is None else v) for k, v in row.items()})
    return out.getvalue()


def dumps_json(obj: Any) -> str:
    """JSON for CLI output: datetimes as ISO strings, non-finite floats as null."""

    def clean(v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, dict):
            return {str(k): clean(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [clean(x) for x in v]
        if isinstance(v, datetime):
            return v.isoformat()
        return v

    return json.dumps(clean(obj), indent=2)
