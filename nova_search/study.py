"""Storage, sampler, create/load, baselines and the worker loop.

- Storage is any SQLAlchemy URL, opened as Optuna's RDBStorage with heartbeats (stale trials of dead
  workers become FAIL and are retried once). ``pool_pre_ping`` for server databases.
- The study is created once (directions, metric names, the spec as a study attribute, baselines
  enqueued); workers load it and rebuild everything from the stored spec.
- The trial budget is counted across all workers in storage (finished trials of every state).
- After each trial is told, the worker writes the trial's note and refreshes the study note and
  graphs for optuna-dashboard (``report.dashboard.after_trial``; never fails the worker).
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import socket
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import optuna
from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback, fail_stale_trials
from optuna.trial import FrozenTrial, TrialState
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from nova_search.artifacts import filesystem_store
from nova_search.db import LevelStore, upgrade
from nova_search.db._url import engine_kwargs
from nova_search.db._url import mask as mask_url
from nova_search.db._url import parse as parse_url
from nova_search.engine.config import EngineConfig
from nova_search.errors import SpecError, StorageError, TrialFailure
from nova_search.metrics import LevelResult
from nova_search.retry import retrying
from nova_search.space import ROLE_ATTR, host_facts, tuned_config
from nova_search.spec import StudySpec, parse_spec
from nova_search.trial import NullReporter, Reporter, TrialContext, run_trial

DEFAULT_STORAGE = "sqlite:///nova.db"
SPEC_ATTR = "nova:spec"
#: study attributes that link the stages of one staged study
STAGE_ATTR = "nova:stage"
PARENT_ATTR = "nova:parent"
#: on the speculative stage: the tuned trial it builds on ({study, number, config, values})
BASE_ATTR = "nova:base"

log = logging.getLogger("nova_search")
T = TypeVar("T")


def open_storage(
    url: str, *, heartbeat_interval: int | None = None, grace_period: int | None = None
) -> RDBStorage:
    """Optuna's RDBStorage with heartbeats on. Interval and grace period (seconds) default to
    NOVA_HEARTBEAT_INTERVAL (30) and NOVA_GRACE_PERIOD (120)."""
    heartbeat_interval = heartbeat_interval or int(os.environ.get("NOVA_HEARTBEAT_INTERVAL", "30"))
    grace_period = grace_period or int(os.environ.get("NOVA_GRACE_PERIOD", "120"))
    parsed = parse_url(url)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        try:
            return RDBStorage(
                url,
                engine_kwargs=engine_kwargs(parsed),
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
        raise SpecError("sampler.name: grid needs a finite space; use tpe, gp, nsga2 or random for this spec")


def stage_study_name(name: str, stage: str) -> str:
    """The Optuna study of one stage: the name itself for a joint study, ``NAME.STAGE`` otherwise."""
    return name if stage == "joint" else f"{name}.{stage}"


def _study_names(storage: RDBStorage, url: str) -> list[str]:
    try:
        return optuna.study.get_all_study_names(storage)
    except SQLAlchemyError as e:
        raise StorageError(f"cannot read storage {mask_url(url)}: {type(e).__name__}") from None


def _new_stage_study(
    storage: RDBStorage, spec: StudySpec, parent: str, stage: str, base: dict[str, Any] | None = None
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
    study.set_user_attr(SPEC_ATTR, spec.model_dump(mode="json"))
    study.set_user_attr(STAGE_ATTR, stage)
    study.set_user_attr(PARENT_ATTR, parent)
    if base is not None:
        study.set_user_attr(BASE_ATTR, base)
        # the tuned configuration, measured again beside the candidates: every gain is quoted against it
        study.enqueue_trial({}, user_attrs={ROLE_ATTR: "tuned"})
        # then every drafter once (the rest of its configuration sampled) before the sampler takes
        # over: each architecture gets a verdict, not only the ones the sampler happens to draw
        drafters = [m for m in spec.space.speculative.methods() if m != "none"]
        if len(drafters) > 1:
            for method in drafters:
                study.enqueue_trial({"spec_method": method})
    else:
        for role in spec.baselines:
            study.enqueue_trial({}, user_attrs={ROLE_ATTR: role})
        if spec.tuned is not None:
            study.enqueue_trial({}, user_attrs={ROLE_ATTR: "reference"})
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
    upgrade(storage_url)  # Optuna's schema and nova's tables: creating a study is the explicit setup step
    storage = open_storage(storage_url)
    existing = _study_names(storage, storage_url)
    first = stage_study_name(name, spec.stages[0])
    taken = [n for n in (name, first) if n in existing]
    if spec.staged:
        taken += [n for n in existing if n.startswith(name + ".") and n[len(name) + 1 :] in spec.stages]
    if taken:
        if not exist_ok:
            raise StorageError(
                f"study {name!r} already exists in {mask_url(storage_url)}; run a worker to continue it "
                "or choose another --study-name"
            )
        return load(name, storage_url, storage=storage)[0]
    base = None
    if spec.stages[0] == "speculative":
        reference = tuned_config(spec)
        assert reference is not None  # the spec validator requires it
        base = {"study": None, "number": None, "config": reference.as_dict(), "values": []}
    return _new_stage_study(storage, spec, name, spec.stages[0], base)


def stage_plan(study_name: str, storage_url: str, storage: RDBStorage | None = None) -> list[tuple[str, str]]:
    """[(stage, Optuna study name)] of a study as users name it: a joint study or one stage by its
    own name; a staged study by the name it was created with (its stages' studies, in order, those
    that exist yet or come next). Raises StorageError when there is no such study."""
    storage = storage or open_storage(storage_url)
    names = _study_names(storage, storage_url)
    if study_name in names:
        probe = optuna.load_study(study_name=study_name, storage=storage)
        return [(str(probe.user_attrs.get(STAGE_ATTR, "joint")), study_name)]
    staged = [n for n in names if n.startswith(study_name + ".")]
    firsts = [n for n in staged if optuna.load_study(study_name=n, storage=storage).user_attrs.get(
        PARENT_ATTR) == study_name]
    if not firsts:
        shown = ", ".join(sorted(names)[:10]) or "none"
        raise StorageError(
            f"no study named {study_name!r} in {mask_url(storage_url)} (studies there: {shown})"
        )
    probe = optuna.load_study(study_name=sorted(firsts)[0], storage=storage)
    spec = parse_spec(probe.user_attrs[SPEC_ATTR], f"study {study_name} spec")
    return [(st, stage_study_name(study_name, st)) for st in spec.stages]


def load(
    study_name: str, storage_url: str, storage: RDBStorage | None = None
) -> tuple[optuna.Study, StudySpec]:
    """The study (for a staged name: its first stage's study) and the spec it stores."""
    storage = storage or open_storage(storage_url)
    names = _study_names(storage, storage_url)
    if study_name not in names:
        plan = stage_plan(study_name, storage_url, storage)
        study_name = plan[0][1]
    probe = optuna.load_study(study_name=study_name, storage=storage)
    raw = probe.user_attrs.get(SPEC_ATTR)
    if raw is None:
        raise StorageError(f"study {study_name!r} was not created by nova-search (no {SPEC_ATTR} attribute)")
    spec = parse_spec(raw, f"study {study_name} spec")
    study = optuna.load_study(study_name=study_name, storage=storage, sampler=make_sampler(spec))
    return study, spec


def best_tuned_trial(trials: list[FrozenTrial], spec: StudySpec) -> FrozenTrial | None:
    """The stage's best feasible COMPLETE trial by the spec's primary (first) objective; the stock
    baseline counts (when nothing beat it, stock is the tuned configuration). Ties: the lower number."""
    primary = spec.objectives[0]
    pool = [
        t
        for t in trials
        if t.state == TrialState.COMPLETE
        and t.values is not None
        and all(v <= 0 for v in t.constraints)
        and isinstance(t.user_attrs.get("nova:config"), dict)
    ]
    if not pool:
        return None
    sign = -1.0 if primary.direction == "maximize" else 1.0
    return min(pool, key=lambda t: (sign * t.values[0], t.number))


def stage_done(study: optuna.Study, spec: StudySpec, stage: str) -> bool:
    trials = study.get_trials(deepcopy=False)
    return count_toward_budget(trials) >= spec.budget.for_stage(stage) and not any(
        t.state == TrialState.RUNNING for t in trials
    )


def _next_stage(
    parent: str, stage: str, previous: optuna.Study, spec: StudySpec, storage: RDBStorage, url: str
) -> optuna.Study | None:
    """The stage's study: loaded if it exists; created (once, under a lock across workers) when the
    previous stage is done; None while the previous stage still runs."""
    name = stage_study_name(parent, stage)
    with _BudgetLock(storage, parent + "#stages"):
        if name not in _study_names(storage, url):
            if not stage_done(previous, spec, spec.stages[spec.stages.index(stage) - 1]):
                return None
            best = best_tuned_trial(previous.get_trials(deepcopy=False), spec)
            if best is None:
                raise StorageError(
                    f"stage {previous.study_name!r} has no feasible COMPLETE trial: there is no tuned "
                    f"configuration to build the {stage} stage on (see `nova-search status`)"
                )
            base = {
                "study": previous.study_name,
                "number": best.number,
                "config": best.user_attrs["nova:config"],
                "values": list(best.values or []),
            }
            _new_stage_study(storage, spec, parent, stage, base)
    return optuna.load_study(study_name=name, storage=storage, sampler=make_sampler(spec))


def run_stages(study_name: str, storage_url: str, opts: WorkerOptions) -> tuple[optuna.Study, int]:
    """Run a study's trials, following its stages: when one stage's budget is spent (counted across
    every worker) and none of its trials runs, the next stage starts on its best trial. Returns the
    last stage's study this worker worked on and the number of trials it ran."""
    storage = open_storage(storage_url)
    plan = stage_plan(study_name, storage_url, storage)
    opts = opts.with_deadline()
    study, spec = load(plan[0][1], storage_url, storage)
    parent = str(study.user_attrs.get(PARENT_ATTR, study_name))
    ran = 0
    for i, (stage, _name) in enumerate(plan):
        if i > 0:
            nxt = _next_stage(parent, stage, study, spec, storage, storage_url)
            if nxt is None:
                log.info("stage %s still runs elsewhere: this worker stops here", plan[i - 1][1])
                break
            study = nxt
        left = None if opts.max_trials is None else opts.max_trials - ran
        if left is not None and left <= 0:
            break
        ran += run_worker(study, spec, replace(opts, max_trials=left))
        if not stage_done(study, spec, stage):
            break  # stopped by --max-trials, --stop-after or an interrupt
    return study, ran


@dataclass
class WorkerOptions:
    max_trials: int | None = None
    gpus: tuple[int, ...] = ()
    artifacts_dir: str | None = None
    reporter: Reporter = field(default_factory=NullReporter)
    #: how long storage calls are retried while the database is away (a restart, a failover)
    storage_retry_s: float = 300.0
    #: start no new trial once this many seconds have passed (running trials finish): for machines
    #: lent in time slots, where a trial cut off by the slot's end would be lost
    stop_after_s: float | None = None
    #: time.monotonic() past which no trial starts (set from stop_after_s by ``with_deadline``)
    deadline: float | None = None

    def with_deadline(self) -> WorkerOptions:
        """These options with the deadline set from ``stop_after_s``, once: a set deadline is kept,
        so the stages of one run share it."""
        if self.stop_after_s is None or self.deadline is not None:
            return self
        return replace(self, deadline=time.monotonic() + self.stop_after_s)


def rdb_storage(study: optuna.Study) -> RDBStorage:
    """The RDBStorage under the study (Optuna wraps it in a cache layer)."""
    storage = getattr(study._storage, "_backend", study._storage)
    if not isinstance(storage, RDBStorage):
        raise StorageError("nova-search workers need an RDB storage (a SQLAlchemy URL)")
    return storage


def count_toward_budget(trials: list[FrozenTrial]) -> int:
    """Trials that use up the budget: running or finished, except failed trials that were retried
    (their retry is the trial that counts). WAITING trials (baselines, retries) are not yet counted."""
    retried = {t.system_attrs.get("failed_trial") for t in trials} - {None}
    return sum(
        1
        for t in trials
        if t.state in (TrialState.RUNNING, TrialState.COMPLETE, TrialState.PRUNED)
        or (t.state == TrialState.FAIL and t.number not in retried)
    )


class _BudgetLock:
    """Serialises "count, then ask" across workers so the budget is exact: a PostgreSQL advisory
    lock, a file lock beside a SQLite file, nothing elsewhere (there only in-flight asks can race)."""

    def __init__(self, storage: RDBStorage, study_name: str) -> None:
        self.storage = storage
        self.key = int.from_bytes(hashlib.sha256(study_name.encode()).digest()[:8], "big", signed=True)
        url = storage.engine.url
        self.backend = url.get_backend_name()
        self.sqlite_path = (
            url.database if self.backend == "sqlite" and url.database not in (None, "", ":memory:") else None
        )
        self._conn: Any = None
        self._fd: int | None = None

    def __enter__(self) -> _BudgetLock:
        if self.backend == "postgresql":
            self._conn = self.storage.engine.connect()
            self._conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": self.key})
        elif self.sqlite_path:
            self._fd = os.open(self.sqlite_path + ".nova-lock", os.O_CREAT | os.O_RDWR, 0o600)
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._conn is not None:
            try:
                self._conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": self.key})
                self._conn.commit()
            finally:
                self._conn.close()
                self._conn = None
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


class _Heartbeat:
    """Records the trial's heartbeat while it runs; a missed beat (database away) is retried next time."""

    def __init__(self, storage: RDBStorage, trial_id: int, interval: float) -> None:
        self.storage, self.trial_id, self.interval = storage, trial_id, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"heartbeat-{trial_id}")

    def __enter__(self) -> _Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while True:
            try:
                self.storage.record_heartbeat(self.trial_id)
            except Exception as e:  # noqa: BLE001 - a missed beat is retried on the next tick
                log.warning("heartbeat of trial %s missed: %s", self.trial_id, type(e).__name__)
            if self._stop.wait(self.interval):
                return


def _any_running(study: optuna.Study) -> bool:
    return bool(study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)))


def _ask_within_budget(study: optuna.Study, lock: _BudgetLock, budget: int) -> optuna.Trial | None:
    with lock:
        if count_toward_budget(study.get_trials(deepcopy=False)) >= budget:
            return None
        return study.ask()


def _run_slot(
    study: optuna.Study,
    spec: StudySpec,
    ctx: TrialContext,
    opts: WorkerOptions,
    stop: threading.Event,
    counter: list[int],
    counter_lock: threading.Lock,
) -> None:
    storage = rdb_storage(study)
    lock = _BudgetLock(storage, study.study_name)
    window = opts.storage_retry_s
    budget = spec.budget.for_stage(ctx.stage) if ctx.stage != "joint" else spec.budget.n_trials
    while not stop.is_set():
        if opts.deadline is not None and time.monotonic() >= opts.deadline:
            log.info("--stop-after reached: no new trial is started here")
            return
        with counter_lock:
            if opts.max_trials is not None and counter[0] >= opts.max_trials:
                return
            counter[0] += 1
        retrying(lambda: fail_stale_trials(study), window, "the stale-trial check")
        trial = retrying(lambda: _ask_within_budget(study, lock, budget), window, "ask")
        if trial is None:
            with counter_lock:
                counter[0] -= 1
            # The budget is used up, but a RUNNING trial may belong to a dead worker: once its heartbeat
            # goes stale it fails and is re-queued, and someone must run the retry. Stay until no trial runs.
            if retrying(lambda: _any_running(study), window, "the running-trials check"):
                stop.wait(storage.heartbeat_interval or 30)
                continue
            return
        values: list[float] | None = None
        state = TrialState.FAIL
        try:
            with _Heartbeat(storage, trial._trial_id, storage.heartbeat_interval or 30):
                values = run_trial(trial, ctx)
                state = TrialState.COMPLETE
        except optuna.TrialPruned:
            state = TrialState.PRUNED
        except TrialFailure:
            state = TrialState.FAIL
        except KeyboardInterrupt:
            _tell(study, trial, TrialState.FAIL, None, window)
            raise
        except Exception as e:  # noqa: BLE001 - an unexpected error fails the trial, not the worker
            log.exception("trial %s failed unexpectedly", trial.number)
            message = f"{type(e).__name__}: {e}"[:500]
            _best_effort(lambda t=trial: t.set_user_attr("nova:reason", "internal"))
            _best_effort(lambda t=trial, m=message: t.set_user_attr("nova:message", m))
            ctx.reporter.trial_finished(trial.number, "FAIL", f"internal: {message}")
        if ctx.cancel.is_set():
            state, values = TrialState.FAIL, None
        _tell(study, trial, state, values, window)
        _update_dashboard(study, trial)


def _update_dashboard(study: optuna.Study, trial: optuna.Trial) -> None:
    """The trial's note, the study note and graphs (optuna-dashboard); logged, never raised."""
    from nova_search.report.dashboard import after_trial  # report reads through api, which imports us

    after_trial(study, trial)


def _tell(
    study: optuna.Study, trial: optuna.Trial, state: TrialState, values: list[float] | None, window: float
) -> None:
    """Tell the outcome, through a database restart. A tell whose commit landed but whose answer was
    lost is retried and finds the trial finished: that is success, not an error."""

    def once() -> None:
        if state == TrialState.COMPLETE:
            study.tell(trial, values, skip_if_finished=True)
        else:
            study.tell(trial, state=state, skip_if_finished=True)

    retrying(once, window, "tell")


def _best_effort(fn: Callable[[], object]) -> None:
    try:
        fn()
    except Exception:  # noqa: BLE001
        pass


def slots_for(gpus: tuple[int, ...], tensor_parallel_size: int) -> list[tuple[int, ...]]:
    """Split the worker's GPUs into groups of tensor_parallel_size: one trial runs on each group."""
    if not gpus:
        return [()]
    if len(gpus) < tensor_parallel_size:
        raise SpecError(
            f"--gpus {','.join(map(str, gpus))}: engine.tensor_parallel_size is {tensor_parallel_size}, "
            f"so a trial needs at least {tensor_parallel_size} GPUs"
        )
    n = len(gpus) // tensor_parallel_size
    return [gpus[i * tensor_parallel_size : (i + 1) * tensor_parallel_size] for i in range(n)]


def run_worker(study: optuna.Study, spec: StudySpec, opts: WorkerOptions) -> int:
    """Run trials until the study's budget (counted across every worker) is met, or ``max_trials``
    trials here. With more GPUs than one trial needs, trials run side by side, one per GPU group.
    Returns the number of trials this worker ran."""
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    # nova's loop records heartbeats and fails stale trials itself (see _run_slot), on purpose
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used with")
    groups = slots_for(opts.gpus, spec.engine.tensor_parallel_size)
    opts = opts.with_deadline()
    storage = rdb_storage(study)
    store = LevelStore(storage.url, retry_window_s=opts.storage_retry_s)
    store.check_ready()
    facts = host_facts(spec, opts.gpus)
    cancel = threading.Event()
    attrs = study.user_attrs
    tuned = attrs.get(BASE_ATTR)
    artifacts_root = Path(opts.artifacts_dir or spec.artifacts_dir)
    base = TrialContext(
        stage=str(attrs.get(STAGE_ATTR, "joint")),
        base_config=EngineConfig.from_dict(tuned["config"]) if isinstance(tuned, dict) else None,
        spec=spec,
        study_name=study.study_name,
        facts=facts,
        artifacts_root=artifacts_root,
        artifact_store=filesystem_store(artifacts_root),
        reporter=opts.reporter,
        sink=TableSink(store, study.study_name, socket.gethostname(), facts.device_name),
        cancel=cancel,
        storage_retry_s=opts.storage_retry_s,
    )
    try:
        return _run_groups(study, spec, opts, base, groups)
    finally:
        store.close()


@dataclass
class TableSink:
    """Writes every measured level to nova_level_result (idempotent, retried across DB restarts)."""

    store: LevelStore
    study_name: str
    host: str
    device_name: str | None

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
            trial_id=trial._trial_id,
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


def _run_groups(
    study: optuna.Study,
    spec: StudySpec,
    opts: WorkerOptions,
    base: TrialContext,
    groups: list[tuple[int, ...]],
) -> int:
    cancel = base.cancel
    counter, counter_lock = [0], threading.Lock()
    if len(groups) == 1:
        ctx = replace(base, gpus=groups[0])
        try:
            _run_slot(study, spec, ctx, opts, cancel, counter, counter_lock)
        except KeyboardInterrupt:
            cancel.set()
            raise
        return counter[0]
    errors: list[BaseException] = []

    def slot(group: tuple[int, ...]) -> None:
        try:
            _run_slot(study, spec, replace(base, gpus=group), opts, cancel, counter, counter_lock)
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=slot, args=(g,), name=f"slot-{','.join(map(str, g))}") for g in groups]
    for t in threads:
        t.start()
    try:
        while any(t.is_alive() for t in threads):
            for t in threads:
                t.join(timeout=0.5)
    except KeyboardInterrupt:
        cancel.set()  # trials see it, their servers are stopped, they end FAIL "interrupted"
        base.stop_servers()
        for t in threads:
            t.join()
        raise
    if errors:
        raise errors[0]
    return counter[0]
