"""The worker loop: ask a trial within the budget (``ask``), run it (``trial.run.run_trial``), tell the
outcome (``tell``); ``stage_loop`` moves a worker from one stage of a study to the next.

Optuna records heartbeats only inside ``study.optimize``; this loop runs its own ask/tell so that it
can hold the budget lock (``db.StorageLock``) around "count, then ask". It covers what optimize would:

- a heartbeat thread per running trial (``db.heartbeat.Heartbeat``), started at once after the ask;
- stale trials of dead workers fail with the reason (``stale``: how long, which worker) and are
  re-queued up to ``db.heartbeat.STALE_RETRIES`` times in a row (``db.heartbeat.fail_stale``, on the
  database's clock); a trial that was asked but never heartbeated (a worker that died in between, or
  an ask whose answer was lost and retried) is failed by ``db.heartbeat.fail_orphans`` after the
  grace period and re-queued every time, since it never ran; the ask and its first heartbeat are
  retried apart, so a lost heartbeat never asks again;
- a worker that was stopped (SIGSTOP, a frozen VM) past the grace period finds its trial failed and
  re-queued by another worker when it resumes: it says so in one line and drops its result;
- every storage call is retried through a database restart (``db.retrying``): start-up, ask, the
  sampler's suggest calls, attributes, heartbeats, tell;
- a worker's GPUs are split into slots (``placement``), one ``trial.slot.Slot`` each (its servers and,
  with confirm, its resident leader); a queued trial that needs more GPUs than a
  slot holds is left for a worker that has them, and a new one never draws such a tensor_parallel_size;
- the budget counts measurements: a configuration refused before launch is counted apart
  (``db.budget``), so the worker asks again;
- once the budget is used up, a worker stays while trials still run anywhere: one may belong to a
  dead worker, and someone must run its retry. It says so (``Reporter.waiting``), looks again every
  ``WAIT_POLL_S`` and leaves as soon as none runs;
- an interrupt (SIGINT, SIGTERM) stops the running servers; the trial ends FAIL ``interrupted``, and a
  second signal cannot cut the recording of that FAIL short.

After each trial is told, ``WorkerOptions.on_trial_done(study, trial)`` runs, and once the stage's
budget is done and no trial runs, ``WorkerOptions.on_stage_done(study)`` (the CLI wires the dashboard
notes to both: ``report.dashboard.publish.after_trial`` and ``after_stage``); they must never raise.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import optuna
from optuna.trial import FrozenTrial, TrialState

from nova_search import schema
from nova_search.artifacts import filesystem_store
from nova_search.db import LevelStore, StorageLock, rdb_storage, retrying, storage_retry_s, study_id, trial_id
from nova_search.db.heartbeat import Heartbeat, fail_orphans, fail_stale
from nova_search.engine.command import engine_prefix, unresolved_references
from nova_search.errors import EngineError, SpecError, TrialFailure
from nova_search.files import MAX_CONFIG_BYTES, read_bounded
from nova_search.loadgen.prompts import prompt_source
from nova_search.loadgen.replay import read_checked
from nova_search.search.host import host_facts
from nova_search.search.placement import Placement, place, queued_gpus
from nova_search.search.sampler import FittingSampler, use_facts
from nova_search.spec import StudySpec
from nova_search.trial.context import NullReporter, Reporter, TrialContext
from nova_search.trial.failure import HostFailure
from nova_search.trial.run import choose_config, run_trial
from nova_search.trial.slot import Slot
from nova_search.worker.ask import ask_within_budget
from nova_search.worker.sink import TableSink
from nova_search.worker.tell import (
    best_effort,
    finished_elsewhere,
    report_end,
    requeue_trial,
    signals_deferred,
    tell_outcome,
)

log = logging.getLogger("nova_search")

TrialDone = Callable[[optuna.Study, FrozenTrial], None]
StageDone = Callable[[optuna.Study], None]
#: how often (seconds) a worker whose budget is spent looks whether trials still run elsewhere
WAIT_POLL_S = 2.0


@dataclass
class WorkerOptions:
    max_trials: int | None = None
    gpus: tuple[int, ...] = ()
    artifacts_dir: str | None = None
    reporter: Reporter = field(default_factory=NullReporter)
    #: how long storage calls are retried while the database is away (a restart, a failover)
    storage_retry_s: float = field(default_factory=storage_retry_s)
    #: start no new trial once this many seconds have passed (running trials finish): for machines
    #: lent in time slots, where a trial cut off by the slot's end would be lost
    stop_after_s: float | None = None
    #: time.monotonic() past which no trial starts (set from stop_after_s by ``with_deadline``)
    deadline: float | None = None
    #: called after each trial is told (the dashboard's notes); must not raise
    on_trial_done: TrialDone | None = None
    #: called when this worker leaves a stage whose budget is done (the notes left); must not raise
    on_stage_done: StageDone | None = None

    def with_deadline(self) -> WorkerOptions:
        """These options with the deadline set from ``stop_after_s``, once: a set deadline is kept,
        so the stages of one run share it."""
        if self.stop_after_s is None or self.deadline is not None:
            return self
        return replace(self, deadline=time.monotonic() + self.stop_after_s)


def run_worker(study: optuna.Study, spec: StudySpec, opts: WorkerOptions) -> int:
    """Run trials until the study's budget (counted across every worker) is met, or ``max_trials``
    trials here. With more GPUs than one trial needs, trials run side by side, one per GPU group.
    Returns the number of trials this worker ran."""
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    # nova's loop records heartbeats and fails stale trials itself (see _run_slot), on purpose
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used with")
    missing = unresolved_references(spec.engine.env, os.environ)
    if missing:
        raise EngineError(
            f"{'; '.join(missing)}: not set in this worker's environment (export it, or give a default)"
        )
    engine_prefix(spec.engine, spec.model)  # no interpreter and no command: say so before any trial is asked
    check_inputs(spec)
    opts = opts.with_deadline()
    storage = rdb_storage(study)
    store = LevelStore(storage.url, retry_window_s=opts.storage_retry_s)
    retrying(store.check_ready, opts.storage_retry_s, "check nova's tables in")
    attrs = retrying(lambda: study.user_attrs, opts.storage_retry_s, "read the study in")
    tuned = schema.BASE.read(attrs)
    stage, base_config = schema.stage_of(attrs), tuned.config if tuned else None
    placement = place(opts.gpus, spec, stage, base_config)
    if placement.fitting is not None:  # tensor_parallel_size is drawn only among what fits a slot
        study.sampler = FittingSampler(study.sampler, placement.fitting)
    facts = replace(host_facts(spec, opts.gpus), gpu_count=placement.size)
    use_facts(study.sampler, facts)  # the sampler proposes nothing the rules refuse on this host
    artifacts_root = Path(opts.artifacts_dir or spec.artifacts_dir)
    base = TrialContext(
        stage=stage,
        base_config=base_config,
        spec=spec,
        study_name=study.study_name,
        facts=facts,
        artifacts_root=artifacts_root,
        artifact_store=filesystem_store(artifacts_root),
        reporter=opts.reporter,
        sink=TableSink(store, study.study_name, socket.gethostname(), facts.device_name, opts.reporter),
        cancel=threading.Event(),
        storage_retry_s=opts.storage_retry_s,
    )
    try:
        return _run_groups(study, spec, opts, base, placement)
    finally:
        store.close()


def check_inputs(spec: StudySpec) -> None:
    """Read, before any trial is asked, what every trial reads: the model's config.json (when the
    model is a local folder) and the workload's prompts (its file, its tokenizer). A FIFO, a device,
    a file past its bound or one that cannot be read is a SpecError naming the field, here, rather
    than a trial that hangs or a budget spent on failures."""
    config = Path(spec.model.path) / "config.json"
    try:
        present = config.exists()
    except (OSError, ValueError):
        present = False
    if present:
        try:
            read_bounded(config, MAX_CONFIG_BYTES)
        except OSError as e:
            raise SpecError(f"model.path: cannot read {config}: {e.strerror or e}") from None
    prompt_source(spec.workload, spec.model)
    if spec.workload.kind == "trace":
        read_checked(spec.workload, spec.sweep)


def _run_groups(
    study: optuna.Study,
    spec: StudySpec,
    opts: WorkerOptions,
    base: TrialContext,
    placement: Placement,
) -> int:
    cancel = base.cancel
    slots = [Slot.of(spec, group) for group in placement.slots]
    counter, counter_lock = [0], threading.Lock()
    if len(slots) == 1:
        try:
            _run_slot(study, spec, replace(base, slot=slots[0]), opts, placement, counter, counter_lock)
        except KeyboardInterrupt:
            cancel.set()
            raise
        return counter[0]
    errors: list[BaseException] = []

    def run(slot: Slot) -> None:
        try:
            _run_slot(study, spec, replace(base, slot=slot), opts, placement, counter, counter_lock)
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    threads = [
        threading.Thread(target=run, args=(s,), name=f"slot-{','.join(map(str, s.gpus))}") for s in slots
    ]
    for t in threads:
        t.start()
    try:
        while any(t.is_alive() for t in threads):
            for t in threads:
                t.join(timeout=0.5)
    except KeyboardInterrupt:
        cancel.set()  # trials see it, their servers are stopped, they end FAIL "interrupted"
        for s in slots:
            s.stop_servers()
        with signals_deferred():
            for t in threads:
                t.join()
        raise
    if errors:
        raise errors[0]
    return counter[0]


def _run_slot(
    study: optuna.Study,
    spec: StudySpec,
    ctx: TrialContext,
    opts: WorkerOptions,
    placement: Placement,
    counter: list[int],
    counter_lock: threading.Lock,
) -> None:
    storage = rdb_storage(study)
    lock = StorageLock(storage.engine, study.study_name)
    window = opts.storage_retry_s
    budget = spec.budget.for_stage(ctx.stage) if ctx.stage != "joint" else spec.budget.n_trials
    stop = ctx.cancel

    def fits(t: FrozenTrial) -> bool:
        return placement.fits(queued_gpus(t, spec, ctx.stage, ctx.base_config))

    def draw(t: optuna.Trial) -> None:
        choose_config(t, spec, ctx.stage, ctx.base_config)

    waited_for = 0  # the running trials last reported while waiting
    try:
        while not stop.is_set():
            if opts.deadline is not None and time.monotonic() >= opts.deadline:
                log.info("--stop-after reached: no new trial is started here")
                return
            with counter_lock:
                if opts.max_trials is not None and counter[0] >= opts.max_trials:
                    return
                counter[0] += 1
            retrying(lambda: fail_stale(study, storage), window, "check for stale trials in")
            retrying(lambda: fail_orphans(study, storage), window, "check for orphaned trials in")
            trial = ask_within_budget(study, lock, budget, window, fits, ctx.reporter, draw)
            if trial is None:
                with counter_lock:
                    counter[0] -= 1
                # The budget is used up, but a RUNNING trial may belong to a dead worker: once its
                # heartbeat goes stale it fails and is re-queued, and someone must run the retry. Stay
                # until no trial runs, looking often: a worker whose wait is over leaves at once.
                running = retrying(lambda: _running_count(study), window, "read the running trials in")
                if running:
                    if running != waited_for:
                        ctx.reporter.waiting(running)
                        waited_for = running
                    stop.wait(WAIT_POLL_S)
                    continue
                from nova_search.results.deploy import write_answer_of

                write_answer_of(study)  # the stage is over: what to deploy, stored; never raises
                if opts.on_stage_done is not None:
                    try:
                        opts.on_stage_done(study)
                    except Exception as e:  # noqa: BLE001 - a view of the study never costs the study
                        log.warning("after the stage: %s: %s", type(e).__name__, e)
                return
            _run_one(study, trial, ctx, window, opts)
    finally:
        ctx.slot.close()  # the slot's leader (confirm) goes with it


def _running_count(study: optuna.Study) -> int:
    """How many trials of the study are RUNNING, read from the database itself, not through Optuna's
    trial cache: a worker that waits on this must see another worker's tell."""
    running = rdb_storage(study).get_all_trials(study_id(study), deepcopy=False, states=(TrialState.RUNNING,))
    return len(running)


class HostProblem(EngineError):
    """The host failed a trial (a full disk, say): the worker stops (exit 1), the trial queued again."""


def _run_one(
    study: optuna.Study, trial: optuna.Trial, ctx: TrialContext, window: float, opts: WorkerOptions
) -> None:
    storage = rdb_storage(study)
    values: list[float] | None = None
    state = TrialState.FAIL
    try:
        with Heartbeat(storage, trial_id(trial), storage.heartbeat_interval or 30):
            values = run_trial(trial, ctx)
            state = TrialState.COMPLETE
    except optuna.TrialPruned:
        state = TrialState.PRUNED
    except HostFailure as e:
        # the host's fault, not the configuration's: the trial is queued again (not counted) and this
        # worker stops rather than fail every trial of the budget the same way
        with signals_deferred():
            tell_outcome(study, trial, TrialState.FAIL, None, window)
        best_effort(lambda: retrying(lambda: requeue_trial(study, trial), window, "queue a trial again in"))
        report_end(study, trial, ctx.reporter)
        raise HostProblem(
            f"host problem on {socket.gethostname()}: {e.message}; trial {trial.number} is queued again "
            "(not counted toward the budget) and this worker stops: fix the host, then start it again"
        ) from None
    except TrialFailure:
        state = TrialState.FAIL
    except KeyboardInterrupt:
        with signals_deferred():
            tell_outcome(study, trial, TrialState.FAIL, None, window)
        report_end(study, trial, ctx.reporter)
        raise
    except optuna.exceptions.UpdateFinishedTrialError:
        if finished_elsewhere(study, trial, window):
            return
        raise
    except Exception as e:  # noqa: BLE001 - an unexpected error fails the trial, not the worker
        if finished_elsewhere(study, trial, window):
            return
        log.exception("trial %s failed unexpectedly", trial.number)
        message = f"{type(e).__name__}: {e}"[:500]
        best_effort(lambda: schema.REASON.write(trial, "internal"))
        best_effort(lambda: schema.MESSAGE.write(trial, message))
    if ctx.cancel.is_set():
        state, values = TrialState.FAIL, None
    if finished_elsewhere(study, trial, window):
        return
    with signals_deferred():
        told = tell_outcome(study, trial, state, values, window)
    if not told:
        return
    frozen = report_end(study, trial, ctx.reporter)
    if opts.on_trial_done is not None and frozen is not None:
        try:
            opts.on_trial_done(study, frozen)
        except Exception as e:  # noqa: BLE001 - a view of the study never costs the study
            log.warning("after trial %s: %s: %s", trial.number, type(e).__name__, e)
