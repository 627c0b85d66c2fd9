"""Storage, sampler, create/load, baselines and the worker loop.

- Storage is any SQLAlchemy URL, opened as Optuna's RDBStorage with heartbeats (stale trials of dead
  workers become FAIL and are retried once). ``pool_pre_ping`` for server databases.
- The study is created once (directions, metric names, the spec as a study attribute, baselines
  enqueued); workers load it and rebuild everything from the stored spec.
- The trial budget is counted across all workers in storage (finished trials of every state).
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback
from optuna.trial import TrialState
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from nova_search.errors import SpecError, StorageError, TrialFailure
from nova_search.space import ROLE_ATTR, host_facts
from nova_search.spec import StudySpec, parse_spec
from nova_search.trial import NullReporter, Reporter, TrialContext, run_trial

DEFAULT_STORAGE = "sqlite:///nova.db"
SPEC_ATTR = "nova:spec"
FINISHED = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)

log = logging.getLogger("nova_search")


def mask_url(url: str) -> str:
    """The URL with its password replaced by ***, safe for logs and errors."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        return "<unparseable storage URL>"


def open_storage(url: str, *, heartbeat_interval: int = 30, grace_period: int = 120) -> RDBStorage:
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        raise StorageError(
            f"storage URL {mask_url(url)!r} is not a SQLAlchemy URL "
            "(e.g. sqlite:///nova.db or postgresql+psycopg://user:pw@host/db)"
        ) from None
    engine_kwargs: dict[str, Any] = {}
    if not parsed.get_backend_name().startswith("sqlite"):
        engine_kwargs["pool_pre_ping"] = True
    else:
        engine_kwargs["connect_args"] = {"timeout": 60}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        try:
            return RDBStorage(
                url,
                engine_kwargs=engine_kwargs,
                heartbeat_interval=heartbeat_interval,
                grace_period=grace_period,
                heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(max_retry=1),
            )
        except (SQLAlchemyError, ImportError, ValueError) as e:
            # the driver's message can echo the URL: never show it, only the masked URL and the kind
            raise StorageError(f"cannot open storage {mask_url(url)}: {type(e).__name__}") from None


def make_sampler(spec: StudySpec) -> optuna.samplers.BaseSampler:
    seed = spec.sampler.seed
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        name = spec.sampler.name
        if name == "tpe":
            return optuna.samplers.TPESampler(
                multivariate=True, group=True, constant_liar=True, seed=seed, n_startup_trials=4
            )
        if name == "gp":
            return optuna.samplers.GPSampler(seed=seed)
        if name == "nsga2":
            return optuna.samplers.NSGAIISampler(seed=seed)
        if name == "random":
            return optuna.samplers.RandomSampler(seed=seed)
        raise SpecError(
            "sampler.name: grid needs a finite space; use tpe, gp, nsga2 or random for this spec"
        )


def create(spec: StudySpec, storage_url: str, study_name: str | None = None, *, exist_ok: bool = False
           ) -> optuna.Study:
    """Create the study once: directions, metric names, the spec, baselines enqueued.

    With ``exist_ok`` an existing study of that name is loaded and continued instead.
    """
    name = study_name or spec.name
    storage = open_storage(storage_url)
    try:
        existing = optuna.study.get_all_study_names(storage)
    except SQLAlchemyError as e:
        raise StorageError(f"cannot read storage {mask_url(storage_url)}: {type(e).__name__}") from None
    if name in existing:
        if not exist_ok:
            raise StorageError(
                f"study {name!r} already exists in {mask_url(storage_url)}; run a worker to continue it "
                "or choose another --study-name"
            )
        return load(name, storage_url, storage=storage)[0]
    study = optuna.create_study(
        storage=storage,
        study_name=name,
        directions=[o.direction for o in spec.objectives],
        sampler=make_sampler(spec),
    )
    study.set_metric_names([o.name for o in spec.objectives])
    study.set_user_attr(SPEC_ATTR, spec.model_dump(mode="json"))
    for role in spec.baselines:
        study.enqueue_trial({}, user_attrs={ROLE_ATTR: role})
    return study


def load(study_name: str, storage_url: str, storage: RDBStorage | None = None
         ) -> tuple[optuna.Study, StudySpec]:
    storage = storage or open_storage(storage_url)
    try:
        names = optuna.study.get_all_study_names(storage)
    except SQLAlchemyError as e:
        raise StorageError(f"cannot read storage {mask_url(storage_url)}: {type(e).__name__}") from None
    if study_name not in names:
        shown = ", ".join(sorted(names)[:10]) or "none"
        raise StorageError(
            f"no study named {study_name!r} in {mask_url(storage_url)} (studies there: {shown})"
        )
    probe = optuna.load_study(study_name=study_name, storage=storage)
    raw = probe.user_attrs.get(SPEC_ATTR)
    if raw is None:
        raise StorageError(f"study {study_name!r} was not created by nova-search (no {SPEC_ATTR} attribute)")
    spec = parse_spec(raw, f"study {study_name} spec")
    study = optuna.load_study(study_name=study_name, storage=storage, sampler=make_sampler(spec))
    return study, spec


def finished_count(study: optuna.Study) -> int:
    return len(study.get_trials(deepcopy=False, states=FINISHED))


@dataclass
class WorkerOptions:
    max_trials: int | None = None
    gpus: tuple[int, ...] = ()
    artifacts_dir: str | None = None
    reporter: Reporter = field(default_factory=NullReporter)


class _Budget:
    """Stops the study when the finished trials across every worker reach the budget."""

    def __init__(self, budget: int) -> None:
        self.budget = budget

    def __call__(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        if finished_count(study) >= self.budget:
            study.stop()


def run_worker(study: optuna.Study, spec: StudySpec, opts: WorkerOptions) -> int:
    """Run trials until the study's budget is met (or ``max_trials`` here). Returns trials run here."""
    budget = spec.budget.n_trials
    if finished_count(study) >= budget:
        return 0
    ctx = TrialContext(
        spec=spec,
        study_name=study.study_name,
        facts=host_facts(spec),
        artifacts_root=Path(opts.artifacts_dir or spec.artifacts_dir),
        gpus=opts.gpus,
        reporter=opts.reporter,
    )
    ran = 0

    def objective(trial: optuna.Trial) -> list[float]:
        nonlocal ran
        ran += 1
        return run_trial(trial, ctx)

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    remaining = budget - finished_count(study)
    n = remaining if opts.max_trials is None else min(remaining, opts.max_trials)
    study.optimize(objective, n_trials=n, callbacks=[_Budget(budget)], catch=(TrialFailure,),
                   gc_after_trial=False)
    return ran

