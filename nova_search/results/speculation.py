"""The speculative verdict of a study's results: an adapter from ``TrialResult`` to the verdict's own
``Profile`` (``analysis.gains``, pure), with the tuned baseline chosen by ``select.tuned_baseline``
and each speculative trial's output equivalence judged against it."""

from __future__ import annotations

from dataclasses import replace

from nova_search.analysis import projection
from nova_search.analysis.breakeven import GainRow
from nova_search.analysis.equivalence import Equivalence, compare_outputs
from nova_search.analysis.gains import Profile, level_gain
from nova_search.analysis.verdict import Verdict, build_verdict
from nova_search.errors import NovaError
from nova_search.knobs import EngineConfig
from nova_search.results.select import tuned_baseline
from nova_search.results.trials import StudyResults, TrialResult, trial_key


def equivalence_of(base: TrialResult, candidate: TrialResult) -> Equivalence | None:
    """The candidate's greedy outputs against the base's (None when either was not recorded, or the
    base's failed: nothing to judge by; None too for a candidate that ran with synthetic acceptance:
    vLLM's synthetic rejection sampler accepts drafted tokens by the chosen profile, not by the
    target's choice, so its output differs from greedy by construction and says nothing of the
    drafter's correctness)."""
    if projection.acceptance_length(candidate.config) is not None:
        return None
    if base.reference is None or candidate.reference is None or not base.reference.ok:
        return None
    if len(base.reference.token_ids) != len(candidate.reference.token_ids):
        return None
    return compare_outputs(base.reference.token_ids, candidate.reference.token_ids)


def profile_of(trial: TrialResult, base: TrialResult | None = None) -> Profile:
    """What the verdict needs of one COMPLETE trial. With ``base`` (the tuned baseline), a speculative
    trial's output equivalence is judged against it."""
    eq = equivalence_of(base, trial) if base is not None and trial.speculative else None
    return Profile(
        equivalent=None if eq is None else eq.equivalent,
        equivalence_note="" if eq is None else eq.describe(),
        key=trial.key,
        study=trial.study,
        number=trial.number,
        role=trial.role,
        config=trial.config or EngineConfig(),
        argv=trial.deployable_argv,
        levels={lv.concurrency: lv.as_dict() for lv in trial.levels},
        windows=trial.windows,
        paired_with=(
            trial_key(trial.paired.leader, trial.stage)
            if trial.paired and trial.paired.leader is not None
            else None
        ),
        paired=trial.paired.levels if trial.paired else {},
    )


def sweep_levels(results: StudyResults) -> list[int]:
    """The spec's concurrency levels, else every level a feasible trial measured."""
    try:
        return sorted(int(c) for c in (results.spec or {})["sweep"]["concurrency"])
    except (KeyError, TypeError, ValueError):
        return sorted({lv.concurrency for t in results.feasible() for lv in t.levels})


def verdict_of(results: StudyResults, *, confidence: float = 0.95) -> Verdict:
    """The verdict and deployment policy over the study's feasible COMPLETE trials, ranked by its first
    objective's metric, against the tuned baseline."""
    if not results.objectives:
        raise NovaError(f"study {results.study_name!r} has no objectives: nothing to rank a verdict by")
    primary = results.objectives[0]
    base = tuned_baseline(results)
    verdict = build_verdict(
        [profile_of(t, base) for t in results.feasible()],
        metric=primary.metric,
        higher_is_better=primary.maximize,
        levels=sweep_levels(results),
        tuned=base.key if base else None,
        confidence=confidence,
    )
    if results.replays_trace and verdict.schedule is not None:
        # vLLM's schedule is keyed by batch size; a replay's levels are speeds of its trace
        note = "a trace replay's levels are speeds, not batch sizes: no dynamic schedule; deploy per range"
        return replace(verdict, schedule=None, schedule_note=note)
    return verdict


def breakeven_rows(results: StudyResults, *, confidence: float = 0.95) -> list[GainRow]:
    """The break-even map's rows from a study: every feasible COMPLETE trial that ran a drafter with
    synthetic acceptance, at every level, against the tuned baseline (on its ABBA pairs with it when
    ``confirm`` measured them, else on each side's windows), by the first objective's metric. A study
    whose drafter carries ``acceptance: {lengths: {low, high}}`` draws L per trial: its rows cover the
    lengths the search measured (``analysis.breakeven``)."""
    if not results.objectives:
        raise NovaError(f"study {results.study_name!r} has no objectives: nothing to rank a gain by")
    primary = results.objectives[0]
    base = tuned_baseline(results)
    if base is None:
        return []
    tuned = profile_of(base)
    rows = []
    for t in results.feasible():
        spec = t.config.speculative if t.config else None
        length = projection.acceptance_length(spec)
        if spec is None or length is None:
            continue
        cand = profile_of(t, base)
        for c in sweep_levels(results):
            g = level_gain(tuned, cand, c, primary.metric, primary.maximize, confidence)
            if g is None:
                continue
            rows.append(
                GainRow(
                    spec.method,
                    spec.num_speculative_tokens,
                    c,
                    length,
                    g.diff_pct,
                    g.ci_low,
                    g.ci_high,
                    g.verdict,
                    min(g.n_tuned, g.n_candidate),
                    t.key,
                )
            )
    return rows
