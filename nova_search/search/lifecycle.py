"""A study in storage: the sampler, create once, load, and the move from one stage to the next.

- The study is created once (``create``: directions, metric names, the spec as a study attribute,
  baselines enqueued); workers load it (``load``) and rebuild everything from the stored spec.
- A staged spec (``stages: [tune, speculative]``) is one Optuna study per stage (``stages``). The next
  stage's study is created, once, under a lock across workers, by the worker that finds the previous
  stage done (its budget spent and none of its trials running), on top of the previous stage's tuned
  baseline (``results.select.tuned_baseline``, the one definition every reader uses too).

The worker loop that runs trials is ``worker``.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

import optuna
from optuna.storages import RDBStorage
from optuna.trial import TrialState

from nova_search import schema
from nova_search.db import (
    StorageLock,
    budget_spent,
    mask,
    open_storage,
    retrying,
    sqlite_path,
    storage_errors,
    storage_retry_s,
    study_names,
    upgrade,
)
from nova_search.db.stages import stage_plan, stage_study_name
from nova_search.errors import NothingQualifies, StudyError
from nova_search.loadgen.replay import read_checked
from nova_search.loadgen.trace import trace_summary
from nova_search.results.decode import study_results
from nova_search.results.select import tuned_baseline
from nova_search.schema import StageBase
from nova_search.search.configs import tuned_config
from nova_search.search.sampler import make_sampler
from nova_search.spec import StudySpec, parse_spec, redacted_spec

DEFAULT_STORAGE = "sqlite:///nova.db"


def drafter_queue(spec: StudySpec) -> list[dict[str, Any]]:
    """The trials a speculative stage queues after its tuned trial: one per drafter where the space
    lists several, one per listed acceptance length (``acceptance.M.lengths.choices``) of each."""
    sp = spec.space.speculative
    drafters = [m for m in sp.methods() if m != "none"]
    queue: list[dict[str, Any]] = []
    for method in drafters:
        profile = sp.acceptance.get(method)
        lengths: list[float | None] = list(profile.listed_lengths()) if profile else []
        for length in lengths or [None]:
            params: dict[str, Any] = {"spec_method": method} if len(drafters) > 1 else {}
            if length is not None:
                params["acceptance_length"] = length
            if params:
                queue.append(params)
    return queue


def _new_stage_study(
    storage: RDBStorage, spec: StudySpec, parent: str, stage: str, base: StageBase | None = None
) -> optuna.Study:
    study = optuna.create_study(
        storage=storage,
        study_name=stage_study_name(parent, stage),
        directions=[o.direction for o in spec.objectives],
        sampler=make_sampler(spec),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study.set_metric_names([o.name for o in spec.objectives])
    schema.SPEC.write(study, redacted_spec(spec))
    schema.STAGE.write(study, stage)
    schema.PARENT.write(study, parent)
    if spec.workload.kind == "trace":
        trace = read_checked(spec.workload, spec.sweep)
        schema.TRACE.write(study, trace_summary(trace, spec.workload.trace_start_s))
    if base is not None:
        schema.BASE.write(study, base)
        if stage == spec.stages[0]:
            # a speculative-first study has no tune stage to measure stock in: its baselines come
            # first here, so that tuning's own gain (stock -> tuned) stands beside the drafters'
            for role in spec.baselines:
                study.enqueue_trial({}, user_attrs=schema.ROLE.item(role))
        # the tuned configuration, measured again beside the candidates: every gain is quoted against it
        study.enqueue_trial({}, user_attrs=schema.ROLE.item("tuned"))
        # then every drafter once, and each listed acceptance length once (the rest of the
        # configuration sampled), before the sampler takes over: each architecture and each length
        # gets a verdict, not only the ones the sampler happens to draw
        for params in drafter_queue(spec):
            study.enqueue_trial(params)
    else:
        for role in spec.baselines:
            study.enqueue_trial({}, user_attrs=schema.ROLE.item(role))
        if spec.tuned is not None:
            study.enqueue_trial({}, user_attrs=schema.ROLE.item("reference"))
    return study


def create(
    spec: StudySpec, storage_url: str, study_name: str | None = None, *, exist_ok: bool = False
) -> optuna.Study:
    """Create the study once: directions, metric names, the spec, baselines enqueued. A staged spec
    creates its first stage's study (``NAME.tune``); the next stage's study is created by the worker
    that finds the first stage's budget spent. Returns the first stage's study.

    With ``exist_ok`` an existing study of that name is loaded and continued instead.
    """
    name = study_name or spec.name
    if spec.workload.kind == "trace":  # read and checked before anything is written
        read_checked(spec.workload, spec.sweep)
    upgrade(storage_url)  # Optuna's schema and nova's tables: creating a study is the explicit setup step
    window = storage_retry_s()
    storage = open_storage(storage_url, retry_s=window)
    with StorageLock(storage.engine, name + "#create"):
        existing = retrying(lambda: study_names(storage, storage_url), window, "read the studies in")
        first = stage_study_name(name, spec.stages[0])
        taken = [n for n in (name, first) if n in existing]
        if spec.staged:
            taken += [n for n in existing if n.startswith(name + ".") and n[len(name) + 1 :] in spec.stages]
        if taken:
            if not exist_ok:
                raise StudyError(
                    f"study {name!r} already exists in {mask(storage_url)}; run a worker to continue it "
                    "or choose another --study-name"
                )
            return load(name, storage_url, storage=storage)[0]
        base = None
        if spec.stages[0] == "speculative":
            reference = tuned_config(spec)
            assert reference is not None  # the spec validator requires it
            base = StageBase(config=reference)
        with storage_errors(storage_url, f"create study {name!r} in"):
            return _new_stage_study(storage, spec, name, spec.stages[0], base)


def load(
    study_name: str, storage_url: str, storage: RDBStorage | None = None
) -> tuple[optuna.Study, StudySpec]:
    """The study (for a staged name: its first stage's study) and the spec it stores. A SQLite file that
    is not there holds no study: refused (StudyError) without making an empty database of it."""
    window = storage_retry_s()
    path = sqlite_path(storage_url) if storage is None else None
    if path is not None and not path.startswith("file:") and not os.path.exists(path):
        raise StudyError(
            f"no study named {study_name!r} in {mask(storage_url)}: the database file {path} does not "
            "exist (nova-search create makes the study, or give the storage it is in: --storage)"
        )
    storage = storage or open_storage(storage_url, retry_s=window)
    plan = retrying(lambda: stage_plan(storage, storage_url, study_name), window, "read the studies in")
    name = plan[0][1] if study_name not in (n for _, n in plan) else study_name

    def read() -> tuple[optuna.Study, dict[str, Any] | None]:
        probe = optuna.load_study(study_name=name, storage=storage)
        return probe, schema.SPEC.read(probe.user_attrs)

    with storage_errors(storage_url, f"load study {name!r} from"):
        _probe, raw = retrying(read, window, f"load study {name!r} from", url=storage_url)
    if raw is None:
        raise StudyError(f"study {name!r} was not created by nova-search (no {schema.SPEC.key} attribute)")
    spec = parse_spec(raw, f"study {name} spec")
    with storage_errors(storage_url, f"load study {name!r} from"):
        study = retrying(
            lambda: optuna.load_study(study_name=name, storage=storage, sampler=make_sampler(spec)),
            window,
            f"load study {name!r} from",
            url=storage_url,
        )
    return study, spec


def stage_done(study: optuna.Study, spec: StudySpec, stage: str) -> bool:
    """The stage's budget is spent (counted across every worker) and none of its trials runs."""
    trials = study.get_trials(deepcopy=False)
    return budget_spent(trials, spec.budget.for_stage(stage)) and not any(
        t.state == TrialState.RUNNING for t in trials
    )


def next_stage(
    parent: str, stage: str, previous: optuna.Study, spec: StudySpec, storage: RDBStorage, url: str
) -> optuna.Study | None:
    """The stage's study: loaded if it exists; created (once, under a lock across workers) when the
    previous stage is done; None while the previous stage still runs."""
    name = stage_study_name(parent, stage)
    with StorageLock(storage.engine, parent + "#stages"):
        if name not in study_names(storage, url):
            if not stage_done(previous, spec, spec.stages[spec.stages.index(stage) - 1]):
                return None
            best = tuned_baseline(study_results(previous, mask(url)))
            if best is None or best.config is None:
                raise NothingQualifies(
                    f"stage {previous.study_name!r} has no feasible COMPLETE trial: there is no tuned "
                    f"configuration to build the {stage} stage on (see `nova-search status`)"
                )
            base = StageBase(
                config=best.config, study=previous.study_name, number=best.number, values=best.values or ()
            )
            _new_stage_study(storage, spec, parent, stage, base)
    return optuna.load_study(study_name=name, storage=storage, sampler=make_sampler(spec))
