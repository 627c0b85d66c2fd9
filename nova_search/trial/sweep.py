"""The concurrency sweep of one trial's server: every level of ``sweep.concurrency``, ``sweep.repeats``
windows each (``trial.window``), each level stored on the trial as it ends (so a crash never loses
it), its warnings (a client-bound level, a workload that came round again), the level's error budget,
the early-stop rule after each level (``analysis.dominance.early_stop``, against the study's finished
trials of the same kind), and the saturation point once the sweep is done."""

from __future__ import annotations

from collections.abc import Callable

import optuna

from nova_search import schema
from nova_search.analysis import find_saturation
from nova_search.analysis.dominance import Finished, early_stop
from nova_search.db import retrying
from nova_search.engine.server import tail
from nova_search.errors import TrialFailure
from nova_search.loadgen.client import Target
from nova_search.loadgen.procs import chunk_rate
from nova_search.loadgen.prompts import JsonlSource, level_seed, prompt_source
from nova_search.measure.feasibility import meets_constraints
from nova_search.measure.metrics import LevelResult, combine_repeats, summarize
from nova_search.trial.context import Measurement, TrialContext, TrialReporter
from nova_search.trial.failure import record_failure
from nova_search.trial.window import keep_requests, run_window, store_levels, warmup_prompts, write_attr


def _requests_done(progress: TrialReporter, before: int) -> Callable[[int], None]:
    """The level's progress hook: the window's finished requests, after the level's earlier windows."""
    return lambda done: progress.requests_done(before + done)


def measure(
    trial: optuna.Trial,
    ctx: TrialContext,
    progress: TrialReporter,
    measured: Measurement,
    target: Target,
    speculative: bool = False,
) -> None:
    """Every level of the sweep, ``sweep.repeats`` windows each, stored as each level ends: the
    windows of each level, in sweep order, go to ``measured.by_level``."""
    spec = ctx.spec
    server, timing, requests_path = measured.server, measured.timing, measured.requests_path
    sweep = spec.sweep
    source = prompt_source(spec.workload, spec.model)
    slos = (spec.slo.to_slo(),) if spec.slo else None
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
        progress.level_started(i, len(sweep.concurrency), c, planned)
        for r in range(sweep.repeats):
            progress.phase(
                spec.level_name(c) + (f" · window {r + 1}/{sweep.repeats}" if sweep.repeats > 1 else "")
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
                on_progress=_requests_done(progress, sum(w.requests for w in windows)),
            )
            expected = chunk_rate(run)
            window_s += run.window_end - run.window_start
            origin = run.window_start if origin is None else origin
            keep_requests(requests_path, run, level=c, repeat=r, origin=origin)
            if not server.alive():
                died = f"the server died during {spec.level_name(c)}"
                raise TrialFailure("crash", died, tail(server.log_path))
            windows.append(summarize(run, slos))
            last_sample = run.engine_samples[-1].values if run.engine_samples else last_sample
        if i + 1 < len(sweep.concurrency) and expected is not None:
            expected *= sweep.concurrency[i + 1] / c
        level = combine_repeats(windows)
        levels.append(level)
        by_level[c] = windows
        if level.client_bound:
            warnings.append(
                f"{spec.level_name(c)}: client-bound, its figures may be the load generator's rather than "
                f"the server's: {level.client_note}"
            )
            progress.phase("warning: " + warnings[-1])
        sent += sum(w.requests for w in windows)
        if records is not None and sent > records:
            hit = level.prefix_cache_hit_rate
            warnings.append(
                f"concurrency {c}: the workload's {records} records came round again ({sent} requests "
                "measured on this server so far): a repeated prompt can be a prefix cache hit, and its TTFT "
                "a hit's" + (f" ({hit:.0%} of prompt tokens hit here)" if hit is not None else "")
            )
            progress.phase("warning: " + warnings[-1])
            records = None  # once a trial
        measured.record_level(level, last_sample)
        store_levels(trial, by_level, ctx.storage_retry_s)
        if warnings:
            write_attr(trial, schema.WARNINGS, tuple(warnings), ctx.storage_retry_s)
        timing["measure_s"] = window_s
        if level.error_rate > sweep.max_error_rate:
            raise TrialFailure(
                "errors",
                f"error rate {level.error_rate:.1%} at {spec.level_name(c)} exceeds "
                f"sweep.max_error_rate {sweep.max_error_rate:.1%}; first errors: {level.first_errors}",
                tail(server.log_path),
            )
        if spec.early_stop is not None and i + 1 < len(sweep.concurrency):
            _stop_early(trial, ctx, levels, speculative)


def store_saturation(trial: optuna.Trial, ctx: TrialContext, by_level: dict[int, list[LevelResult]]) -> None:
    """The sweep's saturation point (``analysis.find_saturation``), stored on the trial."""
    levels = [combine_repeats(ws) for ws in by_level.values()]
    throughputs = {c: [w.output_throughput for w in ws] for c, ws in by_level.items() if len(ws) > 1}
    saturation = find_saturation(levels, throughputs or None)
    write_attr(trial, schema.SATURATION, saturation.as_dict(), ctx.storage_retry_s)


def finished_of_kind(trial: optuna.Trial, speculative: bool) -> list[Finished]:
    """The study's feasible COMPLETE trials with their levels, of the same kind as this one (speculative
    or not): a non-speculative trial is never stopped for a drafter's lead, so the tuned baseline that
    speculative gains are measured against is always measured in full."""
    out = []
    for t in trial.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        levels = schema.LEVELS.read(t.user_attrs)
        config = schema.CONFIG.read(t.user_attrs)
        same_kind = config is not None and (config.speculative is not None) == speculative
        if levels and same_kind and meets_constraints(t):
            out.append(Finished(t.number, levels))
    return out


def _stop_early(trial: optuna.Trial, ctx: TrialContext, levels: list[LevelResult], speculative: bool) -> None:
    """Raise optuna.TrialPruned, with the level and the reason recorded, when the early-stop rule says
    this trial stops after its last measured level."""
    spec = ctx.spec
    rule = spec.early_stop
    assert rule is not None
    finished = retrying(
        lambda: finished_of_kind(trial, speculative), ctx.storage_retry_s, "read the finished trials from"
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
    record_failure(trial, stop.reason, stop.message, None, ctx.storage_retry_s)
    raise optuna.TrialPruned(stop.message)
