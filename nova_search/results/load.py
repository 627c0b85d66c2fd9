"""Reading a study out of storage, once: ``load_results(name, url)`` and ``results_of(study)``.

Reads never create tables (``db.open_storage(read_only=True)``). A staged study is read by the name
it was created with: its stages' trials together (each with its ``stage`` and ``key``), the Pareto
front over all of them, the budget used in every stage. Every failure leaves as ``StorageError`` with
the password masked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import optuna
from optuna.storages import RDBStorage

from nova_search.db import LevelStore, backend_of, mask, open_storage, retrying, storage_errors, study_names
from nova_search.db.stages import stage_plan
from nova_search.errors import NovaError
from nova_search.results.decode import study_results
from nova_search.results.select import pareto_front
from nova_search.results.trials import StudyResults
from nova_search.schema import PARENT

#: what the read side takes from nova's per-level rows: columns every schema revision has
ROW_COLUMNS = (
    "trial_number",
    "concurrency",
    "profile",
    "argv",
    "engine_version",
    "gpu_name",
    "gpu_ids",
    "worker_host",
)


def _level_rows(storage_url: str, study_name: str) -> dict[int, list[dict[str, Any]]]:
    """nova's per-level rows by trial number; empty when nova's tables are not there (optional)."""
    try:
        with LevelStore(storage_url, retry_window_s=5.0) as store:
            rows = store.rows(study_name, ROW_COLUMNS)
    except NovaError:
        return {}
    out: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault(int(r["trial_number"]), []).append(r)
    return out


def merge_stages(study_name: str, parts: Sequence[StudyResults]) -> StudyResults:
    """One view of a staged study: every stage's trials, the front over all of them, every stage's
    budget use."""
    first = parts[0]
    trials = tuple(t for p in parts for t in p.trials)
    front = pareto_front([t for t in trials if t.feasible], first.directions)
    return StudyResults(
        study_name=study_name,
        storage=first.storage,
        objectives=first.objectives,
        trials=trials,
        front_keys=tuple(t.key for t in front),
        spec=first.spec,
        trace=first.trace,
        budget_used=sum(p.budget_used for p in parts),
        stages=tuple(t.stage for t in (p.trials[0] for p in parts if p.trials)),
    )


def read_results(storage: RDBStorage, url: str, study_name: str, *, rows: bool = True) -> StudyResults:
    """``load_results`` on a storage already open."""
    masked = mask(url)
    plan = stage_plan(storage, url, study_name)
    existing = set(study_names(storage, url))
    parts = []
    for _stage, name in plan:
        if name not in existing:
            continue
        with storage_errors(url, f"read study {name!r} from"):
            study = optuna.load_study(study_name=name, storage=storage)
            level_rows: Mapping[int, Sequence[Mapping[str, Any]]] = _level_rows(url, name) if rows else {}
            parts.append(study_results(study, masked, level_rows))
    if len(plan) == 1 and plan[0][1] == study_name:
        return parts[0]
    return merge_stages(study_name, parts)


def load_results(study_name: str, storage_url: str, *, retry_s: float = 0.0) -> StudyResults:
    """Read every trial of ``study_name`` (a staged study by its own name) from ``storage_url``;
    a lost connection is retried for ``retry_s`` seconds (a worker's closing summary)."""

    def read() -> StudyResults:
        storage = open_storage(storage_url, read_only=True)
        try:
            return read_results(storage, storage_url, study_name)
        finally:
            storage.engine.dispose()

    return retrying(read, retry_s, f"read study {study_name!r} from", url=storage_url)


def results_of(study: optuna.Study) -> StudyResults:
    """The results of the nova study an open Optuna study belongs to: for one stage of a staged study,
    the whole staged study (a worker's view after a trial, for the dashboard), nova's level rows
    included: the device each trial ran on is there, and the notes name it as every other output
    does."""
    backend = backend_of(study)
    if not isinstance(backend, RDBStorage):  # an in-memory study (tests, notebooks): itself alone
        return study_results(study, "memory")
    parent = PARENT.read(study.user_attrs)
    return read_results(backend, backend.url, parent or study.study_name)
