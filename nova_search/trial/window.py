"""One measurement window on one server: its plan and its run, as the sweep (``trial``) and the
confirmation (``confirm``) measure it. A window is a warmup (excluded), then the measured requests
of one seed; a client-bound window is re-run on new prompts (``RERUN_SEED_STEP``). A trace replay's
window is its slice at the level's speed, flagged client-bound when its sends fell behind."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import optuna

from nova_search import schema
from nova_search.analysis import median_ci
from nova_search.artifacts import append_jsonl, request_rows
from nova_search.db import retrying
from nova_search.loadgen.client import Target
from nova_search.loadgen.procs import ClientPlan, Progress, measure_level
from nova_search.loadgen.prompts import PromptSource, level_seed
from nova_search.loadgen.replay import TraceSource, flag_late
from nova_search.loadgen.runner import LevelPlan, PromptStream, take
from nova_search.measure.metrics import HEADLINE, LevelResult, combine_repeats
from nova_search.measure.records import LevelRun
from nova_search.measure.slo import MissRule
from nova_search.spec import SPEED_KEY, ArrivalSpec, StudySpec, TraceArrival

#: added to a window's seed for each re-run of a client-bound window (new prompts, same workload)
RERUN_SEED_STEP = 7_919


def client_plan(spec: StudySpec) -> ClientPlan:
    sweep = spec.sweep
    return ClientPlan(
        cpus=tuple(sweep.client_cpus) if sweep.client_cpus else None, processes=sweep.client_processes
    )


def warmup_prompts(spec: StudySpec, source: PromptSource, level_index: int) -> Sequence[object]:
    """The level's warmup requests (the same for every window that warms up at this level)."""
    seed = level_seed(spec.workload.seed, level_index, warmup=True)
    return take(source.prompts(seed), spec.sweep.warmup_requests)


def run_window(
    spec: StudySpec,
    source: PromptSource,
    target: Target,
    *,
    concurrency: int,
    seed: int,
    warmup: Sequence[object],
    expected: float | None = None,
    on_progress: Progress | None = None,
    arrival: ArrivalSpec | None = None,
    miss_rule: MissRule | None = None,
) -> LevelRun:
    """Measure one window of ``seed``'s prompts at ``concurrency`` on ``target``; ``on_progress`` gets
    its finished requests as it goes (``loadgen.procs.run_level``). ``arrival``: how requests arrive
    (default: the workload's); ``miss_rule``: a capacity probe's, which replaces the error budget (its
    failed requests miss the SLO: the window is abandoned once clearly over saturation, and never fails
    the trial for its errors)."""
    sweep = spec.sweep
    arrival = arrival if arrival is not None else spec.workload.arrival
    count, schedule = sweep.requests, None
    if isinstance(arrival, TraceArrival):  # a trace replay: the level is a speed (loadgen.replay)
        assert isinstance(source, TraceSource)
        schedule = source.schedule(concurrency / SPEED_KEY, sweep.requests, sweep.duration_s)
        count = len(schedule)

    def plan_for(attempt: int) -> LevelPlan:
        # a re-run of a client-bound window gets prompts of its own (the prefix cache saw the others)
        run_seed = seed + attempt * RERUN_SEED_STEP
        return LevelPlan(
            concurrency=concurrency,
            warmup=tuple(warmup),
            prompts=PromptStream(source, run_seed, count),
            duration_s=sweep.duration_s,
            request_timeout_s=sweep.request_timeout_s,
            metrics_url=f"{target.base_url}/metrics",
            metrics_interval_s=sweep.metrics_interval_s,
            arrival=arrival,
            arrival_seed=run_seed,
            schedule=schedule,
            max_errors=error_budget(spec) if miss_rule is None else None,
            miss_rule=miss_rule,
        )

    run = measure_level(target, plan_for, client_plan(spec), expected, on_progress)
    return flag_late(run, arrival) if isinstance(arrival, TraceArrival) else run


def error_budget(spec: StudySpec) -> int | None:
    """Failed requests a window of ``sweep.requests`` tolerates: one more and its error rate is past
    ``sweep.max_error_rate`` whatever the rest do, so the window is abandoned (``LevelPlan.max_errors``).
    A window of ``duration_s`` has no count to take a share of: None."""
    sweep = spec.sweep
    if sweep.requests is None:
        return None
    return math.floor(sweep.max_error_rate * sweep.requests + 1e-9)  # 0.29 * 100 is 28.999...96


def keep_requests(
    path: Path, run: LevelRun, *, level: int, repeat: int, origin: float, probe: float | None = None
) -> None:
    """Append the window's requests to a trial's requests file (never raises); ``probe``: the load of a
    capacity probe's window."""
    append_jsonl(path, request_rows(run.records, level=level, repeat=repeat, origin=origin, probe=probe))


def write_attr(trial: optuna.Trial, attr: schema.Attr[Any], value: Any, retry_s: float) -> None:
    """A user attribute, written through a database restart (retried for ``retry_s``)."""
    retrying(lambda: attr.write(trial, value), retry_s, f"write {attr.key} of a trial in")


def store_levels(trial: optuna.Trial, by_level: dict[int, list[LevelResult]], retry_s: float) -> None:
    """The levels measured so far (each the median of its windows) and, where a level has several
    windows, each window's headline metrics and a median interval for each."""
    write_attr(trial, schema.LEVELS, tuple(combine_repeats(ws) for ws in by_level.values()), retry_s)
    several = {c: ws for c, ws in by_level.items() if len(ws) > 1}
    if several:
        repeats = {c: [headline(w) for w in ws] for c, ws in several.items()}
        write_attr(trial, schema.REPEATS, repeats, retry_s)
        write_attr(trial, schema.INTERVALS, {str(c): intervals(ws) for c, ws in several.items()}, retry_s)


def headline(w: LevelResult) -> dict[str, Any]:
    return {m: getattr(w, m) for m in HEADLINE}


def intervals(windows: Sequence[LevelResult]) -> dict[str, Any]:
    """A median confidence interval per headline metric over a level's windows."""
    out: dict[str, Any] = {}
    for m in HEADLINE:
        values = [v for w in windows if (v := getattr(w, m)) is not None]
        if values:
            out[m] = median_ci(values).as_dict()
    return out
