"""One trial, end to end: this module chains its stages (``trial.confirm`` then measures further
windows against the slot's leader, through ``trial.window``):

    spec -> search.configs.sample -> EngineConfig -> search.rules -> engine.command -> Server
      -> per level: loadgen.prompts -> trial.window -> measure.metrics.summarize -> LevelResult (stored)
      -> objectives -> values + constraints                                    -> server torn down

Failures are classified and recorded on the trial, then raised as ``TrialFailure`` (Optuna: FAIL)
or ``optuna.TrialPruned``: a configuration the compatibility table refuses (never launched), one whose
server never came up for a reason of its own (out of memory, a refused flag; both also marked
infeasible, so the sampler avoids their neighbours), or one stopped early after a level
(``early_stop``). A level already measured is stored on the trial before the next one starts, so a
crash never loses it.

Every measured request is appended to the trial's ``requests.jsonl`` as its window ends; once the
server is down, that file and the server log are uploaded as the trial's Optuna artifacts (when the
context has an artifact store), before the trial is told.
"""

from __future__ import annotations

import errno
import math
import os
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna

from nova_search import schema
from nova_search.analysis import find_saturation
from nova_search.analysis.dominance import Finished, early_stop
from nova_search.artifacts import REQUESTS_FILE, upload_files
from nova_search.db import retrying
from nova_search.engine.command import build_launch, new_api_key, served_name
from nova_search.engine.config import EngineConfig
from nova_search.engine.probe import read_version
from nova_search.engine.server import Server, free_port, tail
from nova_search.errors import TrialFailure
from nova_search.loadgen.client import Target
from nova_search.loadgen.procs import chunk_rate
from nova_search.loadgen.prompts import JsonlSource, level_seed, prompt_source
from nova_search.loadgen.reference import REFERENCE_PROMPTS, collect_outputs, reference_prompts
from nova_search.measure import objectives as obj
from nova_search.measure.metrics import LevelResult, RequestSLO, combine_repeats, summarize
from nova_search.results.export import serve_argv
from nova_search.search.configs import baseline_config, sample, with_graph_sizes
from nova_search.search.rules import incompatibilities
from nova_search.spec import StudySpec
from nova_search.trial.confirm import LEADER_REQUESTS_FILE, follow_up
from nova_search.trial.context import Measurement, TrialContext
from nova_search.trial.residency import adopt_tuned, make_room
from nova_search.trial.slot import park_mode
from nova_search.trial.window import keep_requests, run_window, store_levels, warmup_prompts, write_attr
from nova_search.worker.placement import server_gpus

#: how a server that never came up failed, when the configuration is to blame (the same launch fails
#: the same way again): out of memory, or a flag or combination the engine refuses. Such a trial ends
#: PRUNED with the reason, and infeasible (UNLAUNCHABLE_CONSTRAINT = 1), like a configuration the
#: compatibility table refuses; any other failure (a crash, a timeout) ends FAIL
UNLAUNCHABLE_REASONS = ("oom", "unsupported")
UNLAUNCHABLE_CONSTRAINT = "launchable"


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


#: errno values that say the host is in trouble, not the configuration: a full or read-only disk, a
#: quota, no file descriptors left, an I/O error, a folder this user may not write
HOST_ERRNOS = frozenset(
    {
        errno.ENOSPC,
        errno.EROFS,
        errno.EDQUOT,
        errno.EMFILE,
        errno.ENFILE,
        errno.EIO,
        errno.EACCES,
        errno.EPERM,
    }
)
#: bytes written (and synced, then removed) in the trial's folder before its boot, and again after a
#: failure, to tell a full disk from a configuration that fails
HOST_PROBE_BYTES = 1 << 20


class HostFailure(TrialFailure):
    """The host failed the trial (``HOST_ERRNOS``), not its configuration: the worker records it as
    FAIL ``host``, queues the trial again (it does not count toward the budget) and stops."""

    def __init__(self, message: str, log_tail: str = "") -> None:
        super().__init__("host", message, log_tail)


def host_errno(e: BaseException) -> str | None:
    """``strerror (ENAME)`` when ``e`` is an OSError of the host's (``HOST_ERRNOS``), else None."""
    if isinstance(e, OSError) and e.errno in HOST_ERRNOS:
        return f"{os.strerror(e.errno)} ({errno.errorcode[e.errno]})"
    return None


def host_problem(folder: Path) -> str | None:
    """What is wrong with the host where a trial writes (``folder``), None when nothing is: the folder
    is made, ``HOST_PROBE_BYTES`` written to a file in it and synced, the file removed."""
    tmp = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".nova-probe-", dir=folder)
        with os.fdopen(fd, "wb") as f:
            f.write(bytes(HOST_PROBE_BYTES))
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:
        why = host_errno(e)
        return None if why is None else f"cannot write in {folder}: {why}"
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
    return None


def trial_timeout_s(spec: StudySpec) -> float:
    """How long a trial may take (``sweep.trial_timeout_s``, else derived): twice the worst its plan can
    take with every request at its timeout: two boots and stops (the trial's server and a slot
    leader's), the reference outputs (one request at a time), and at each level the warmup and the
    windows (``ceil(requests / concurrency)`` rounds of requests, or ``duration_s`` plus one timeout).
    A wedged server is usually failed long before, by the level's error budget."""
    sweep, engine = spec.sweep, spec.engine
    if sweep.trial_timeout_s is not None:
        return sweep.trial_timeout_s
    timeout = sweep.request_timeout_s
    total = 2 * (engine.boot_timeout_s + engine.stop_timeout_s) + REFERENCE_PROMPTS * timeout
    for c in sweep.concurrency:
        total += math.ceil(sweep.warmup_requests / c) * timeout
        if sweep.requests is not None:
            window = math.ceil(sweep.requests / c) * timeout
        else:
            window = (sweep.duration_s or 0.0) + timeout
        total += sweep.repeats * window
    return 2 * total


class TrialDeadline:
    """Kills the trial's server (its process group) once the trial's time is up: a wedged server
    then fails its requests at once, and the trial ends FAIL ``timeout`` (``expired``)."""

    def __init__(self, seconds: float, server: Server) -> None:
        self.seconds = seconds
        self.server = server
        self.expired = threading.Event()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> TrialDeadline:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()

    def _expire(self) -> None:
        self.expired.set()
        proc = self.server.proc
        if proc is not None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # stopped (SIGSTOP) processes too; the teardown follows
            except (ProcessLookupError, PermissionError):
                pass

    def failure(self) -> TrialFailure:
        return TrialFailure(
            "timeout",
            f"the trial ran past its deadline of {self.seconds:g} s (sweep.trial_timeout_s): its server "
            "was stopped",
        )


def run_trial(trial: optuna.Trial, ctx: TrialContext) -> list[float]:
    spec = ctx.spec
    started = time.monotonic()
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
    ctx.reporter.trial_started(trial.number, config.label(), config.as_dict())

    problems = incompatibilities(config, ctx.facts)
    if problems:
        _unlaunchable(trial, ctx)
        _set(trial, ctx, schema.REASON, "incompatible")
        _set(trial, ctx, schema.MESSAGE, "; ".join(problems))
        _set(trial, ctx, schema.SUMMARY, _short("incompatible: " + "; ".join(problems)))
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
    kept, confirmed = False, ""  # the server stays up as the slot's leader (confirm), and what it did
    slot.track(server)

    def boot_leader(leader_config: EngineConfig) -> Server:
        return _boot_leader(trial, ctx, gpus, timing, leader_config)

    deadline = TrialDeadline(trial_timeout_s(spec), server)
    try:
        problem = host_problem(log_path.parent)
        if problem is not None:
            raise HostFailure(problem)
        # this slot's GPUs, held on the host until its last server stops (another worker given the
        # same --gpus waits its turn): within the trial's deadline
        slot.hold_gpus(deadline.seconds)
        deadline.__enter__()
        adopted = adopt_tuned(trial, ctx, boot_leader)
        room = make_room(ctx, gpus, config)
        ctx.reporter.phase(trial.number, "booting")
        server.start()
        server.wait_ready()
        timing["boot_s"] = server.boot_s or 0.0
        version = read_version(server.base_url, server.api_key)
        if version is not None:
            _set(trial, ctx, schema.ENGINE_VERSION, version)
        target = Target(server.base_url, served_name(spec.model), server.api_key)
        # greedy outputs of a fixed prompt set, before the sweep (empty cache, the same for every
        # trial): the verdict checks a speculative configuration against its base with them
        ctx.reporter.phase(trial.number, "reference outputs (greedy)")
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
        _measure(trial, ctx, measured, target, config.speculative is not None)
        kept, confirmed = follow_up(trial, ctx, measured, gpus, boot_leader)
        confirmed = "; ".join(x for x in (adopted, room, confirmed) if x)
        levels = [combine_repeats(ws) for ws in measured.by_level.values()]
        _saturation(trial, ctx, measured.by_level)
        if deadline.expired.is_set():
            raise deadline.failure()
    except TrialFailure as e:
        if not isinstance(e, HostFailure) and not ctx.cancel.is_set():
            problem = host_problem(log_path.parent)  # a full disk fails servers as a bad flag would
            if problem is not None:
                e = HostFailure(f"{problem} (the trial saw {e.reason}: {e.message})", e.log_tail)
        if ctx.cancel.is_set():
            e = TrialFailure("interrupted", "the worker was interrupted", e.log_tail)
        elif deadline.expired.is_set() and e.reason != "timeout":
            e = TrialFailure("timeout", f"{deadline.failure().message} ({e.reason}: {e.message})", e.log_tail)
        never_up = "boot_s" not in timing
        state = "PRUNED" if never_up and e.reason in UNLAUNCHABLE_REASONS else "FAIL"
        _record_failure(trial, ctx, e.reason, e.message, e.log_tail or _tail(log_path), state)
        if state == "PRUNED":
            _unlaunchable(trial, ctx)
            raise optuna.TrialPruned(f"{e.reason}: {e.message}") from None
        raise e from None
    except KeyboardInterrupt:
        _record_failure(trial, ctx, "interrupted", "the worker was interrupted", tail(log_path))
        raise
    except OSError as e:
        why = host_errno(e)
        if why is None or deadline.expired.is_set():
            raise
        failure = HostFailure(f"{type(e).__name__}: {why}: {e.filename or ''}".rstrip(": "))
        _record_failure(trial, ctx, failure.reason, failure.message, _tail(log_path))
        raise failure from None
    except Exception:
        if not deadline.expired.is_set():
            raise
        # whatever the killed server made of the step it was in (a cut connection, say)
        e = deadline.failure()
        _record_failure(trial, ctx, e.reason, e.message, tail(log_path))
        raise e from None
    finally:
        deadline.__exit__()
        if not kept:
            slot.stop(server)
        timing["total_s"] = time.monotonic() - started
        _set(trial, ctx, schema.TIMING, timing)
        if ctx.artifact_store is not None:
            upload_files(trial, ctx.artifact_store, [requests_path, log_path, leader_requests])

    values = obj.objective_values(levels, spec.objectives)
    missing = [o.name for o, v in zip(spec.objectives, values, strict=True) if v is None]
    if missing:
        e = TrialFailure("errors", f"objective(s) undefined: {', '.join(missing)}")
        _record_failure(trial, ctx, e.reason, e.message, "")
        raise e
    for name, value in obj.constraint_values(levels, [c.condition for c in spec.constraints]).items():
        retrying(lambda n=name, v=value: trial.set_constraint(n, v), ctx.storage_retry_s, "set_constraint")
    result = [float(v) for v in values if v is not None]
    summary = ", ".join(f"{o.name}={v:.4g}" for o, v in zip(spec.objectives, result, strict=True))
    summary += f" · {confirmed}" if confirmed else ""
    _set(trial, ctx, schema.SUMMARY, summary)
    return result


def _tail(log_path: Path) -> str:
    """The server log's tail; empty when it cannot be read (a host problem)."""
    try:
        return tail(log_path)
    except OSError:
        return ""


def _requests_done(ctx: TrialContext, number: int, before: int) -> Callable[[int], None]:
    """The level's progress hook: the window's finished requests, after the level's earlier windows."""
    return lambda done: ctx.reporter.requests_done(number, before + done)


def _measure(
    trial: optuna.Trial, ctx: TrialContext, measured: Measurement, target: Target, speculative: bool = False
) -> None:
    """Every level of the sweep, ``sweep.repeats`` windows each, stored as each level ends: the
    windows of each level, in sweep order, go to ``measured.by_level``."""
    spec = ctx.spec
    server, timing, requests_path = measured.server, measured.timing, measured.requests_path
    sweep = spec.sweep
    source = prompt_source(spec.workload, spec.model)
    slos = (RequestSLO(**spec.slo.model_dump()),) if spec.slo else None
    levels: list[LevelResult] = []
    by_level = measured.by_level
    warnings: list[str] = []
    # a JSONL workload's records come round again on a server that sends more requests than it has
    records = len(source.items) if isinstance(source, JsonlSource) else None
    sent = 0
    window_s = 0.0  # the seconds inside measurement windows so far
    origin: float | None = None
    expected: float | None = None  # the next level's chunk rate, scaled from the last one's
    for i, c in enumerate(sweep.concurrency):
        windows: list[LevelResult] = []
        last_sample: dict[str, float] = {}
        planned = sweep.requests * sweep.repeats if sweep.requests else None
        ctx.reporter.level_started(trial.number, i, len(sweep.concurrency), c, planned)
        for r in range(sweep.repeats):
            ctx.reporter.phase(
                trial.number,
                f"concurrency {c}" + (f" · window {r + 1}/{sweep.repeats}" if sweep.repeats > 1 else ""),
            )
            run = run_window(
                spec,
                source,
                target,
                concurrency=c,
                seed=level_seed(spec.workload.seed, i, repeat=r),
                # the warmup runs once per level, before its first window
                warmup=warmup_prompts(spec, source, i) if r == 0 else (),
                expected=expected,
                on_progress=_requests_done(ctx, trial.number, sum(w.requests for w in windows)),
            )
            expected = chunk_rate(run)
            window_s += run.window_end - run.window_start
            origin = run.window_start if origin is None else origin
            keep_requests(requests_path, run, level=c, repeat=r, origin=origin)
            if not server.alive():
                raise TrialFailure("crash", f"the server died during concurrency {c}", tail(server.log_path))
            windows.append(summarize(run, slos))
            last_sample = run.engine_samples[-1].values if run.engine_samples else last_sample
        if i + 1 < len(sweep.concurrency) and expected is not None:
            expected *= sweep.concurrency[i + 1] / c
        level = combine_repeats(windows)
        levels.append(level)
        by_level[c] = windows
        if level.client_bound:
            warnings.append(
                f"concurrency {c}: client-bound, its figures may be the load generator's rather than the "
                f"server's: {level.client_note}"
            )
            ctx.reporter.phase(trial.number, "warning: " + warnings[-1])
        sent += sum(w.requests for w in windows)
        if records is not None and sent > records:
            hit = level.prefix_cache_hit_rate
            warnings.append(
                f"concurrency {c}: the workload's {records} records came round again ({sent} requests "
                "measured on this server so far): a repeated prompt can be a prefix cache hit, and its TTFT "
                "a hit's" + (f" ({hit:.0%} of prompt tokens hit here)" if hit is not None else "")
            )
            ctx.reporter.phase(trial.number, "warning: " + warnings[-1])
            records = None  # once a trial
        measured.record_level(level, last_sample)
        store_levels(trial, by_level, ctx.storage_retry_s)
        if warnings:
            _set(trial, ctx, schema.WARNINGS, tuple(warnings))
        timing["measure_s"] = window_s
        if level.error_rate > sweep.max_error_rate:
            raise TrialFailure(
                "errors",
                f"error rate {level.error_rate:.1%} at concurrency {c} exceeds "
                f"sweep.max_error_rate {sweep.max_error_rate:.1%}; first errors: {level.first_errors}",
                tail(server.log_path),
            )
        if spec.early_stop is not None and i + 1 < len(sweep.concurrency):
            _stop_early(trial, ctx, levels, speculative)


def _saturation(trial: optuna.Trial, ctx: TrialContext, by_level: dict[int, list[LevelResult]]) -> None:
    levels = [combine_repeats(ws) for ws in by_level.values()]
    throughputs = {c: [w.output_throughput for w in ws] for c, ws in by_level.items() if len(ws) > 1}
    saturation = find_saturation(levels, throughputs or None)
    _set(trial, ctx, schema.SATURATION, saturation.as_dict())


def _finished(trial: optuna.Trial, speculative: bool) -> list[Finished]:
    """The study's feasible COMPLETE trials with their levels, of the same kind as this one (speculative
    or not): a non-speculative trial is never stopped for a drafter's lead, so the tuned baseline that
    speculative gains are measured against is always measured in full."""
    out = []
    for t in trial.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        levels = schema.LEVELS.read(t.user_attrs)
        config = schema.CONFIG.read(t.user_attrs)
        same_kind = config is not None and (config.speculative is not None) == speculative
        if levels and same_kind and all(v <= 0.0 for v in t.constraints.values()):
            out.append(Finished(t.number, levels))
    return out


def _stop_early(trial: optuna.Trial, ctx: TrialContext, levels: list[LevelResult], speculative: bool) -> None:
    """Raise optuna.TrialPruned, with the level and the reason recorded, when the early-stop rule says
    this trial stops after its last measured level."""
    spec = ctx.spec
    rule = spec.early_stop
    assert rule is not None
    finished = retrying(
        lambda: _finished(trial, speculative), ctx.storage_retry_s, "read the finished trials from"
    )
    stop = early_stop(
        levels,
        finished,
        spec.objectives,
        [c.condition for c in spec.constraints],
        rule.margin,
        rule.min_levels,
    )
    if stop is None:
        return
    _record_failure(trial, ctx, stop.reason, stop.message, None, "PRUNED")
    raise optuna.TrialPruned(stop.message)


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


def _record_failure(
    trial: optuna.Trial,
    ctx: TrialContext,
    reason: str,
    message: str,
    log_tail: str | None,
    state: str = "FAIL",
) -> None:
    """Why a trial ended other than COMPLETE: its reason, message, summary and (when there is one) the
    server log's tail (the worker loop reports the trial's end once it is told)."""
    _set(trial, ctx, schema.REASON, reason)
    _set(trial, ctx, schema.MESSAGE, message)
    if log_tail is not None:
        _set(trial, ctx, schema.LOG_TAIL, log_tail[-4000:])
    _set(trial, ctx, schema.SUMMARY, _short(f"{reason}: {message}"))


def _unlaunchable(trial: optuna.Trial, ctx: TrialContext) -> None:
    """Mark a configuration that cannot run as infeasible (``launchable`` = 1), so that the sampler
    learns from it: Optuna's TPE reads COMPLETE and PRUNED trials only (a FAIL trial is invisible to
    it), and puts an infeasible one among the bad trials whose neighbourhood it avoids."""
    retrying(
        lambda: trial.set_constraint(UNLAUNCHABLE_CONSTRAINT, 1.0), ctx.storage_retry_s, "set_constraint"
    )


def _short(text: str, limit: int = 200) -> str:
    """A one-line summary short enough for the dashboard's trial table."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _set(trial: optuna.Trial, ctx: TrialContext, attr: schema.Attr[Any], value: Any) -> None:
    """A user attribute, written through a database restart (retried for ctx.storage_retry_s)."""
    write_attr(trial, attr, value, ctx.storage_retry_s)
