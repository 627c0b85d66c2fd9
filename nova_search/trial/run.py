"""One trial, end to end: this module chains its stages (``trial.sweep`` measures the levels,
``trial.leader`` keeps the slot's leader around the trial and confirms it against that leader):

    spec -> search.configs.sample -> EngineConfig -> search.rules -> engine.command -> Server
      -> leader.prepare -> boot -> reference outputs -> sweep.measure (per level: trial.window ->
         measure.metrics.summarize -> LevelResult, stored) -> capacity_search.measure_capacity (capacity:
         probes at the SLO -> Capacity, stored) -> leader.settle
      -> objectives -> values + constraints                                    -> server torn down

Whatever the trial raises is classified (``failure.classify``) and recorded on the trial, then raised
as ``TrialFailure`` (Optuna: FAIL) or ``optuna.TrialPruned``: a configuration the compatibility table
refuses (never launched), one whose server never came up for a reason of its own (out of memory, a
refused flag; both also marked infeasible, so the sampler avoids their neighbours), or one stopped
early after a level (``early_stop``). The trial runs under its deadline (``deadline.TrialDeadline``).

Every measured request is appended to the trial's ``requests.jsonl`` as its window ends; once the
server is down, that file and the server log are uploaded as the trial's Optuna artifacts (when the
context has an artifact store), before the trial is told.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import optuna

from nova_search import schema
from nova_search.artifacts import REQUESTS_FILE, upload_files
from nova_search.db import retrying
from nova_search.engine.command import build_launch, new_api_key, served_name
from nova_search.engine.probe import read_version
from nova_search.engine.server import Server, free_port
from nova_search.errors import TrialFailure
from nova_search.knobs import EngineConfig
from nova_search.loadgen.client import Target
from nova_search.loadgen.reference import collect_outputs, reference_prompts
from nova_search.measure import objectives as obj
from nova_search.measure.capacity import Capacity
from nova_search.measure.metrics import LevelResult, combine_repeats
from nova_search.results.launch import serve_argv
from nova_search.search.configs import baseline_config, sample, with_graph_sizes
from nova_search.search.placement import server_gpus
from nova_search.search.rules import incompatibilities
from nova_search.spec import StudySpec
from nova_search.trial.capacity_search import measure_capacity
from nova_search.trial.confirm import LEADER_REQUESTS_FILE
from nova_search.trial.context import Measurement, TrialContext
from nova_search.trial.deadline import TrialDeadline, trial_timeout_s
from nova_search.trial.failure import (
    HostFailure,
    classify,
    host_problem,
    record_failure,
    short,
    unlaunchable,
)
from nova_search.trial.leader import LeaderPolicy
from nova_search.trial.slot import park_mode
from nova_search.trial.sweep import measure, store_saturation
from nova_search.trial.window import write_attr


def choose_config(
    trial: optuna.Trial, spec: StudySpec, stage: str = "joint", base: EngineConfig | None = None
) -> EngineConfig:
    role = schema.ROLE.read(trial.user_attrs)
    if role in ("stock", "reference", "tuned"):
        config = baseline_config(role, spec, base)
        if config is None:
            whose = "the spec's" if role == "reference" else "the stage's"
            raise TrialFailure("internal", f"a {role} baseline trial needs {whose} tuned configuration")
        return with_graph_sizes(spec, config)
    return with_graph_sizes(spec, sample(trial, spec, stage, base))


def run_trial(trial: optuna.Trial, ctx: TrialContext) -> list[float]:
    spec = ctx.spec
    started = time.monotonic()
    progress = ctx.reporter_for(trial)
    # the sampler's suggest calls write to storage: retried through a database restart like every call
    config = retrying(
        lambda: choose_config(trial, spec, ctx.stage, ctx.base_config),
        ctx.storage_retry_s,
        "sample a trial in",
    )
    _set(trial, ctx, schema.CONFIG, config)
    slot = ctx.slot
    gpus = server_gpus(slot.gpus, config)  # of the slot's GPUs, what the server is given
    _set(trial, ctx, schema.WORKER, schema.WorkerTag(ctx.worker, gpus, os.getpid()))
    progress.started(config.label(), config.as_dict())

    problems = incompatibilities(config, ctx.facts)
    if problems:
        unlaunchable(trial, ctx.storage_retry_s)
        _set(trial, ctx, schema.REASON, "incompatible")
        _set(trial, ctx, schema.MESSAGE, "; ".join(problems))
        _set(trial, ctx, schema.SUMMARY, short("incompatible: " + "; ".join(problems)))
        raise optuna.TrialPruned("incompatible: " + "; ".join(problems))

    log_path = ctx.artifacts_root / ctx.study_name / f"trial-{trial.number:04d}" / "server.log"
    server = _server(ctx, config, gpus, log_path)
    plan = server.plan
    _set(trial, ctx, schema.ARGV, plan.argv)
    _set(trial, ctx, schema.DEPLOY_ARGV, serve_argv(plan.argv))  # what a deployment runs, no secrets
    requests_path = log_path.with_name(REQUESTS_FILE)
    requests_path.unlink(missing_ok=True)  # a study of the same name run before in this folder
    leader_requests = requests_path.with_name(LEADER_REQUESTS_FILE)  # the leader's side of its pairs
    leader_requests.unlink(missing_ok=True)
    _set(trial, ctx, schema.SERVER_LOG, str(log_path))
    timing: dict[str, float] = {}
    levels: list[LevelResult] = []
    capacity: Capacity | None = None
    figures: dict[str, float | None] = {}  # the capacity search's, once it has run
    kept, confirmed = False, ""  # the server stays up as the slot's leader (confirm), and what it did
    slot.track(server)

    def boot_leader(leader_config: EngineConfig) -> Server:
        return _boot_leader(trial, ctx, gpus, timing, leader_config)

    leader = LeaderPolicy(trial, ctx, gpus, boot_leader)
    deadline = TrialDeadline(trial_timeout_s(spec), server)
    try:
        problem = host_problem(log_path.parent)
        if problem is not None:
            raise HostFailure(problem)
        # this slot's GPUs, held on the host until its last server stops (another worker given the
        # same --gpus waits its turn): within the trial's deadline
        slot.hold_gpus(deadline.seconds)
        with deadline:
            notes = leader.prepare(config)
            progress.phase("booting")
            server.start()
            server.wait_ready()
            timing["boot_s"] = server.boot_s or 0.0
            version = read_version(server.base_url, server.api_key)
            if version is not None:
                _set(trial, ctx, schema.ENGINE_VERSION, version)
            target = Target(server.base_url, served_name(spec.model), server.api_key)
            # greedy outputs of a fixed prompt set, before the sweep (empty cache, the same for every
            # trial): the verdict checks a speculative configuration against its base with them
            progress.phase("reference outputs (greedy)")
            reference = collect_outputs(
                target, reference_prompts(spec.workload, spec.model), spec.sweep.request_timeout_s
            )
            _set(trial, ctx, schema.REFERENCE, reference)

            def record_level(level: LevelResult, engine_metrics: dict[str, float]) -> None:
                ctx.sink.record(
                    trial=trial,
                    level=level,
                    engine_metrics=engine_metrics,
                    argv=list(plan.argv),
                    engine_version=version,
                    gpus=gpus,
                )

            measured = Measurement(server, requests_path, timing, record_level)
            measure(trial, ctx, progress, measured, target, config.speculative is not None)
            if spec.capacity is not None:
                capacity = measure_capacity(trial, ctx, progress, measured, target, gpus, config.gpus)
                figures = measured.figures
            kept, confirmed = leader.settle(measured)
            confirmed = "; ".join(x for x in (*notes, confirmed) if x)
            levels = [combine_repeats(ws) for ws in measured.by_level.values()]
            store_saturation(trial, ctx, measured.by_level)
            if deadline.expired.is_set():
                raise deadline.failure()
    except BaseException as e:
        failure = classify(
            e, log_path=log_path, cancel=ctx.cancel, deadline=deadline, booted="boot_s" in timing
        )
        if failure is None:
            raise
        record_failure(trial, failure.reason, failure.message, failure.log_tail, ctx.storage_retry_s)
        if failure.state == "PRUNED":
            unlaunchable(trial, ctx.storage_retry_s)
        if failure.raised is e and isinstance(e, KeyboardInterrupt):
            raise  # as it came: the worker stops
        raise failure.raised from None
    finally:
        if not kept:
            slot.stop(server)
        timing["total_s"] = time.monotonic() - started
        _set(trial, ctx, schema.TIMING, timing)
        if ctx.artifact_store is not None:
            upload_files(trial, ctx.artifact_store, [requests_path, log_path, leader_requests])

    values = obj.objective_values(levels, spec.objectives, figures)
    missing = [o.name for o, v in zip(spec.objectives, values, strict=True) if v is None]
    if missing:
        undefined = f"objective(s) undefined: {', '.join(missing)}"
        if capacity is not None and capacity.status == "indeterminate":
            e = TrialFailure("indeterminate", f"{undefined}: {capacity.text()}")
        else:
            e = TrialFailure("errors", undefined)
        record_failure(trial, e.reason, e.message, "", ctx.storage_retry_s)
        raise e
    conditions = [c.condition for c in spec.constraints]
    for name, value in obj.constraint_values(levels, conditions, figures).items():
        retrying(lambda n=name, v=value: trial.set_constraint(n, v), ctx.storage_retry_s, "set_constraint")
    result = [float(v) for v in values if v is not None]
    summary = ", ".join(f"{o.name}={v:.4g}" for o, v in zip(spec.objectives, result, strict=True))
    summary += f" · {capacity.text()}" if capacity is not None else ""
    summary += f" · {confirmed}" if confirmed else ""
    _set(trial, ctx, schema.SUMMARY, summary)
    return result


def _server(ctx: TrialContext, config: EngineConfig, gpus: tuple[int, ...], log_path: Path) -> Server:
    """A server for ``config`` on ``gpus`` (not started): loopback, a free port, a fresh API key, and
    vLLM's sleep mode where the slot's leader sleeps (confirm)."""
    spec = ctx.spec
    plan = build_launch(
        spec.engine,
        spec.model,
        config,
        port=free_port(spec.engine.host),
        api_key=new_api_key(),
        gpus=gpus,
        sleep_mode=park_mode(spec) == "sleep",
    )
    return Server(
        plan, log_path, boot_timeout_s=spec.engine.boot_timeout_s, stop_timeout_s=spec.engine.stop_timeout_s
    )


def _boot_leader(
    trial: optuna.Trial,
    ctx: TrialContext,
    gpus: tuple[int, ...],
    timing: dict[str, float],
    config: EngineConfig,
) -> Server:
    """A finished trial's configuration ``config``, booted as it ran (on the first of the trial's
    ``gpus`` that it needs) to be the slot's leader, its log
    beside the trial's (``leader-server.log``); its boot counts as boot time (``leader_boot_s``).
    Raises TrialFailure, its server stopped, when it does not come up."""
    log_path = ctx.artifacts_root / ctx.study_name / f"trial-{trial.number:04d}" / "leader-server.log"
    server = _server(ctx, config, server_gpus(gpus, config), log_path)
    ctx.slot.track(server)
    try:
        server.start()
        server.wait_ready()
    except TrialFailure:
        ctx.slot.stop(server)
        raise
    finally:
        timing["leader_boot_s"] = timing.get("leader_boot_s", 0.0) + (server.boot_s or 0.0)
    return server


def _set(trial: optuna.Trial, ctx: TrialContext, attr: schema.Attr[Any], value: Any) -> None:
    """A user attribute, written through a database restart (retried for ctx.storage_retry_s)."""
    write_attr(trial, attr, value, ctx.storage_retry_s)
