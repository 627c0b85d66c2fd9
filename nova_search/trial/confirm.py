"""Measuring again where it matters (``spec.confirm``): explore with one window a level, then measure
the trials on or near the front again, in ABBA pairs against the leader, until the two intervals
separate or the cap is reached.

- **Which trials.** A finished feasible trial is confirmed unless another finished feasible trial of
  the study beat it on every objective, at every level, by more than ``confirm.near`` (the early-stop
  rule's dominance with its own margin). In the speculative stage every feasible candidate is
  confirmed: the verdict judges each drafter against the tuned baseline, and needs n >= 3 on both
  sides to verify a gain or call a loss.
- **Against whom.** The leader is the slot's resident server: the best trial it has run on the first
  objective (in the speculative stage: the tuned baseline); a trial paired with it is judged against
  it on their pairs (``head_to_head``), not on its stored value from, maybe, another machine. It stays
  up between trials, asleep in vLLM's sleep mode on a GPU (``park: sleep``; a switch costs about a
  second, not a boot), or awake beside the trial on the CPU build (``park: keep``). A trial with no
  leader on its slot (the first one, the tuned baseline of a speculative stage) is confirmed alone:
  ``min_pairs`` more windows; but a drafter trial that is its worker's first boots the stage's finished
  tuned baseline as the leader first (``residency.adopt_tuned``), so every drafter is judged on pairs.
  Outside the speculative stage, a trial to be confirmed on a slot with no leader (its worker's first:
  another worker, or an earlier run, measured the rest) boots the study's best finished trial, as it
  ran, as the leader (``residency.adopt_leader``; the trial's server sleeps while it boots), so it is
  measured against the study's front and not alone, nor against a weaker trial that happens to be the
  worker's first.
- **ABBA.** Pair k runs, at each confirmed level, one window of each server on the same prompts
  (a seed of the pair and the trial), the leader first when k is even, the trial first when odd, so
  drift on the machine falls on both alike. One server runs all its levels of the pair, then the
  other (``pair_schedule``): up the levels in even pairs, down in odd ones, so that a pair ends with
  the server the next pair starts with. That is one switch a pair (sleep one, wake the other), not
  one a window. A window warms up (``sweep.warmup_requests``) unless its server has already run
  that level since it was last woken. After ``min_pairs`` pairs, and after each one more, the
  first objective's metric is compared level by level (``analysis.noise.compare``): once every level
  is a verified gain or loss the pairs stop ("separated"), else at ``max_pairs`` ("cap").
- **What is kept.** The trial's windows join its levels (the level is the median of all of them, and
  the objective values told to Optuna follow); both sides' windows are stored on the trial
  (``schema.PAIRED``) after each pair, so a crash keeps every completed window. A finished trial's
  attributes cannot change, so the leader's new windows live on the trial they were paired with.
- **The budget of a parked leader.** Before each boot beside it, the free memory of each of the
  slot's GPUs must hold the new trial's ``gpu_memory_utilization`` share and a margin, and the host
  must keep ``host_reserve_gib`` free beside the weights a sleeper backs up there; otherwise the
  leader is let go (stopped) and the next trial that beats the open seat becomes the leader.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import optuna

from nova_search import schema
from nova_search.analysis.dominance import dominates
from nova_search.analysis.noise import compare
from nova_search.engine import sleep as sleep_mode
from nova_search.engine.command import served_name
from nova_search.engine.server import Server, tail
from nova_search.errors import TrialFailure
from nova_search.loadgen.client import Target
from nova_search.loadgen.prompts import level_seed, prompt_source
from nova_search.measure import objectives as obj
from nova_search.measure.feasibility import holds, meets_constraints
from nova_search.measure.metrics import LevelResult, combine_repeats, summarize
from nova_search.measure.records import Paired
from nova_search.trial.context import Measurement, TrialContext
from nova_search.trial.residency import finished_trials
from nova_search.trial.window import (
    headline,
    keep_requests,
    run_window,
    store_levels,
    warmup_prompts,
    write_attr,
)

log = logging.getLogger(__name__)

#: per trial, added to a confirmation window's seed: the leader's prefix cache never saw its prompts
CONFIRM_SEED_STEP = 104_723
LEADER_REQUESTS_FILE = "leader-requests.jsonl"


# ---------------------------------------------------------------- the rules (pure)


def leader_first(pair: int) -> bool:
    """ABBA: the leader runs first in pairs 0, 2, 4, ..., the trial first in 1, 3, 5, ..."""
    return pair % 2 == 0


def pair_schedule(pair: int, levels: Sequence[int], with_leader: bool) -> list[tuple[bool, int]]:
    """Pair ``pair``'s windows in order, as (the leader's?, level): the first server's levels, then the
    other's; up the levels when ``pair`` is even, down when odd (the next pair starts on the server and
    level this one ended with). Alone: the trial's levels only."""
    ordered = list(levels) if pair % 2 == 0 else list(reversed(levels))
    if not with_leader:
        return [(False, c) for c in ordered]
    first = leader_first(pair)
    return [(first, c) for c in ordered] + [(not first, c) for c in ordered]


def dominated_by(
    levels: Sequence[LevelResult],
    finished: Sequence[tuple[int, Sequence[LevelResult]]],
    objectives: Sequence[obj.ObjectiveLike],
    near: float,
) -> int | None:
    """The first finished trial that beat ``levels`` on every objective, at every level, by more than
    ``near``; None when none did (the trial is on or near the front)."""
    for number, other in finished:
        if dominates(other, levels, objectives, near) is not None:
            return number
    return None


def settled(
    samples: Mapping[int, tuple[Sequence[float], Sequence[float]]],
    *,
    higher_is_better: bool,
    min_pairs: int,
    max_pairs: int,
) -> str | None:
    """Why the pairs stop now ("separated": every level's difference is verified, one way or the other;
    "cap": ``max_pairs`` reached), or None to measure another pair. ``samples``: level -> (leader's,
    trial's) values of the ranking metric."""
    n = min((min(len(a), len(b)) for a, b in samples.values()), default=0)
    if n >= max_pairs:
        return "cap"
    if n < min_pairs:
        return None
    for a, b in samples.values():
        if compare(a, b, higher_is_better=higher_is_better).verdict == "not_verified":
            return None
    return "separated"


def head_to_head(p: Paired, objective: obj.ObjectiveLike) -> tuple[int, float, float] | None:
    """The leader's number, its ``objective`` and the trial's over their pairs alone: each side's median
    per paired level, then ``objective.at`` over those (``objectives.value_at``). Both measured on one
    machine at one time, unlike a leader's stored value, which may come from another session. None
    without a leader, or when the pairs do not hold the objective's level."""
    if p.leader is None:
        return None
    maximize = objective.direction == "maximize"

    def side(i: int) -> float | None:
        medians = [
            (c, statistics.median(values))
            for c, both in p.levels.items()
            if (values := [w[objective.metric] for w in both[i] if objective.metric in w])
        ]
        return obj.value_at(medians, objective.at, maximize)

    leader, trial = side(0), side(1)
    return None if leader is None or trial is None else (p.leader, leader, trial)


# ---------------------------------------------------------------- one trial, measured again


@dataclass
class _Side:
    server: Server
    target: Target
    awake: bool
    windows: dict[int, list[LevelResult]]
    #: the levels this server has run since it was last woken (their windows need no warmup)
    warm: set[int]


def wants_confirmation(
    trial: optuna.Trial, ctx: TrialContext, levels: Sequence[LevelResult], figures: obj.Figures | None = None
) -> str | None:
    """Why the trial is not confirmed (None: it is)."""
    spec = ctx.spec
    assert spec.confirm is not None
    conditions = [c.condition for c in spec.constraints]
    if not holds(obj.constraint_values(levels, conditions, figures)):
        return "it breaks a constraint"
    if ctx.stage == "speculative":
        return None
    finished = []
    for t in finished_trials(trial, ctx.storage_retry_s, "read the finished trials from"):
        other = schema.LEVELS.read(t.user_attrs)
        if other and meets_constraints(t):
            finished.append((t.number, other))
    by = dominated_by(levels, finished, spec.objectives, spec.confirm.near)
    return None if by is None else f"#{by} beat it by more than confirm.near at every level"


def confirm_trial(
    trial: optuna.Trial,
    ctx: TrialContext,
    measured: Measurement,
    trial_awake: bool = True,
    switch_s: float = 0.0,
) -> tuple[bool, Paired]:
    """Measure the trial again against its slot's leader (see the module docstring), adding its windows to
    ``measured.by_level`` and storing them as each pair ends. ``trial_awake``: False when the trial's
    server sleeps (the leader was booted beside it); ``switch_s``: the seconds its sleeps and wakes took
    before. Returns whether the trial's server was left asleep, and the pairs as stored."""
    spec = ctx.spec
    rule = spec.confirm
    assert rule is not None
    started = time.monotonic()
    slot = ctx.slot
    server, by_level, requests_path = measured.server, measured.by_level, measured.requests_path
    timing, record_level = measured.timing, measured.record_level
    source = prompt_source(spec.workload, spec.model)
    slos = (spec.slo.to_slo(),) if spec.slo else None
    name = served_name(spec.model)
    leader = slot.leader
    levels = [c for c in spec.sweep.concurrency if not rule.levels or c in rule.levels]
    # the trial's server has just run every level (the sweep), awake since
    warm = set(levels) if trial_awake else set()
    trial_side = _Side(server, Target(server.base_url, name, server.api_key), trial_awake, by_level, warm)
    lead = None
    if leader is not None:
        s = leader.server
        lead = _Side(s, Target(s.base_url, name, s.api_key), not leader.asleep, {}, set())
    mine: dict[int, list[LevelResult]] = {c: [] for c in levels}
    metric = spec.objectives[0].metric
    maximize = spec.objectives[0].direction == "maximize"
    stopped = ""
    pairs = 0
    origin = time.perf_counter()

    def switch(side: _Side, wake: bool) -> None:
        nonlocal switch_s
        try:
            switch_s += (sleep_mode.wake_up if wake else sleep_mode.sleep)(side.server.base_url)
        except TrialFailure as e:
            if side is trial_side:
                raise
            raise _LeaderLost(e.message) from None
        side.awake = wake
        if wake:
            side.warm.clear()

    def use(side: _Side, other: _Side | None) -> None:
        """Only ``side`` awake (sleep mode); with keep, both stay up."""
        if slot.park != "sleep":
            return
        if other is not None and other.awake:
            switch(other, wake=False)
        if not side.awake:
            switch(side, wake=True)

    def window(side: _Side, other: _Side | None, c: int, pair: int) -> None:
        use(side, other)
        i = spec.sweep.concurrency.index(c)
        seed = level_seed(spec.workload.seed, i, repeat=spec.sweep.repeats + pair)
        seed += (trial.number + 1) * CONFIRM_SEED_STEP
        warmup = () if c in side.warm else warmup_prompts(spec, source, i)
        run = run_window(spec, source, side.target, concurrency=c, seed=seed, warmup=warmup)
        side.warm.add(c)
        timing["measure_s"] = timing.get("measure_s", 0.0) + run.window_end - run.window_start
        is_trial = side is trial_side
        path = requests_path if is_trial else requests_path.with_name(LEADER_REQUESTS_FILE)
        keep_requests(path, run, level=c, repeat=spec.sweep.repeats + pair, origin=origin)
        if not side.server.alive():
            if is_trial:
                raise TrialFailure("crash", f"the server died during concurrency {c}", tail(server.log_path))
            raise _LeaderLost("its server died")
        result = summarize(run, slos)
        side.windows.setdefault(c, []).append(result)
        if is_trial:
            mine[c].append(result)
            if run.engine_samples:
                record_level(combine_repeats(by_level[c]), run.engine_samples[-1].values)

    def paired() -> Paired:
        return Paired(
            leader=leader.number if leader is not None else None,
            park=(slot.park or "") if leader is not None else "",
            pairs=pairs,
            stopped=stopped,
            switch_s=switch_s,
            levels={
                c: (
                    tuple(headline(w) for w in (lead.windows.get(c, []) if lead else [])),
                    tuple(headline(w) for w in mine[c]),
                )
                for c in levels
            },
        )

    progress = ctx.reporter_for(trial)
    try:
        for pair in range(rule.max_pairs if lead is not None else rule.min_pairs):
            what = f"confirm · pair {pair + 1}" + (f" vs #{leader.number}" if leader else " (alone)")
            for is_leader, c in pair_schedule(pair, levels, lead is not None):
                progress.phase(f"{what} · {'leader' if is_leader else 'trial'} · concurrency {c}")
                if is_leader and lead is not None:
                    window(lead, trial_side, c, pair)
                else:
                    window(trial_side, lead, c, pair)
            pairs = pair + 1
            store_levels(trial, by_level, ctx.storage_retry_s)
            if lead is None:
                stopped = "alone" if pairs >= rule.min_pairs else ""
            else:
                samples = {
                    c: (_values(lead.windows.get(c, []), metric), _values(mine[c], metric)) for c in levels
                }
                rest = settled(
                    samples, higher_is_better=maximize, min_pairs=rule.min_pairs, max_pairs=rule.max_pairs
                )
                stopped = rest or ""
            write_attr(trial, schema.PAIRED, paired(), ctx.storage_retry_s)
            if stopped:
                break
        if lead is not None and slot.park == "sleep" and lead.awake:
            switch(lead, wake=False)
            write_attr(trial, schema.PAIRED, paired(), ctx.storage_retry_s)
    except _LeaderLost as e:
        stopped = f"the leader was lost: {e}"
        slot.let_go(str(e))
        write_attr(trial, schema.PAIRED, paired(), ctx.storage_retry_s)
    if leader is not None and slot.leader is leader:
        leader.asleep = slot.park == "sleep"
    timing["switch_s"] = switch_s
    timing["confirm_s"] = time.monotonic() - started
    return not trial_side.awake, paired()


class _LeaderLost(Exception):
    pass


def _values(windows: Sequence[LevelResult], metric: str) -> list[float]:
    return [float(v) for w in windows if (v := getattr(w, metric, None)) is not None]
