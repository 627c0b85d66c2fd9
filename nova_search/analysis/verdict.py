"""The speculative verdict and the deployment policy (docs/concepts.md, "Verdict and policy").

Pure functions over small frozen records; no storage, no HTTP. The input is one ``Profile`` per trial
(what a trial measured at each concurrency level, with its per-window samples; a candidate against the
tuned baseline at one level: ``gains``); the output is a ``Verdict``:

- every speculative candidate is compared with the **tuned** non-speculative baseline, level by level,
  on the ranking metric (the study's first objective) with ``analysis.compare``: a gain counts only when
  its confidence interval excludes zero (so a level needs >= 3 windows on both sides, ``sweep.repeats``);
- per drafter method: the best candidate at each level, the concurrency range in which it is verified
  better, the latency tradeoffs (mean and p99 of TTFT, TPOT, ITL and E2E: which improve, which
  regress), and its status: ``accepted`` (verified better somewhere), ``rejected`` (enough windows
  on both sides, >= ``MIN_SAMPLES`` at every level judged, and never verified better: it does not pay,
  kept with its data; a verified loss is named) or ``not_enough_evidence`` (never verified better,
  but some level had fewer windows than a verdict needs: the reason says how many). A candidate
  whose greedy output diverged from its base (``equivalent`` False) is ``flagged`` and kept out;
- the **policy**: ordered, non-overlapping concurrency ranges from 1 up, each with the configuration
  to deploy. Speculation is deployed only on the levels where it was verified better, and on the
  unmeasured concurrencies between two such levels (between two different speculative
  configurations, the lower one serves up to the next); everything else falls back to tuned,
  including the concurrencies above the highest verified level;
- where the speculative ranges differ only in ``num_speculative_tokens``, vLLM's dynamic schedule
  (``num_speculative_tokens_per_batch_size``: inclusive batch-size ranges -> k, 0 = drafting off) so
  one server replaces switching configurations. In a closed loop the batch size is about the
  concurrency; under open-loop load it is the number of running requests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from itertools import groupby
from typing import Any, Literal

from nova_search.analysis import projection
from nova_search.analysis.gains import (
    LevelGain,
    Profile,
    Tradeoff,
    better_gain,
    gain_key,
    level_gain,
    pct_change,
    tradeoffs,
)
from nova_search.analysis.noise import MIN_SAMPLES
from nova_search.analysis.schedule import PolicyRange, dynamic_schedule, without_k

Status = Literal["accepted", "rejected", "not_enough_evidence", "flagged"]

#: how each status reads in tables and notes
STATUS_TEXT = {
    "accepted": "accepted",
    "rejected": "rejected",
    "not_enough_evidence": "not enough evidence",
    "flagged": "flagged",
}


@dataclass(frozen=True)
class DrafterVerdict:
    method: str
    status: Status
    trials: tuple[str, ...]
    #: per level, the best candidate of this method against tuned
    per_level: tuple[LevelGain, ...]
    #: [lowest, highest] of the run of consecutive measured levels that holds the method's largest
    #: verified gain; None when it is verified better nowhere. Every level inside is verified better.
    verified_range: tuple[int, int] | None
    #: at the level of its largest verified gain (else its largest gain): what the latencies did
    tradeoffs: tuple[Tradeoff, ...]
    reason: str
    #: every run of consecutive measured levels where the method is verified better, lowest first
    #: (a method can win at both ends and lose between: [(1, 1), (256, 256)])
    verified_ranges: tuple[tuple[int, int], ...] = ()
    #: "projected at acceptance L=..." when its trials ran with synthetic acceptance: every gain,
    #: range and status of this verdict is a projection, not a measurement of the drafter
    projected: str | None = None


@dataclass(frozen=True)
class Verdict:
    metric: str
    higher_is_better: bool
    tuned: str | None
    stock: str | None
    #: tuned against stock, per level (%), reported apart from every speculative gain
    tuned_vs_stock: tuple[tuple[int, float | None], ...]
    drafters: tuple[DrafterVerdict, ...]
    policy: tuple[PolicyRange, ...]
    #: [[min_batch, max_batch, k], ...] or None; see ``schedule_note``
    schedule: tuple[tuple[int, int, int], ...] | None
    schedule_note: str
    notes: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def drafter_verdict(
    method: str,
    tuned: Profile,
    cands: Sequence[Profile],
    levels: Sequence[int],
    metric: str,
    higher_is_better: bool,
    confidence: float,
) -> DrafterVerdict:
    """One method's verdict against tuned. When its candidates ran with synthetic acceptance, the
    verdict says so first: "projected at acceptance L=2.6: verified better ..." (a projection)."""
    d = _drafter_verdict(method, tuned, cands, levels, metric, higher_is_better, confidence)
    projected = projection.labels(c.config for c in cands)
    if projected is None:
        return d
    return replace(d, projected=projected, reason=f"{projected}: {d.reason}")


def _drafter_verdict(
    method: str,
    tuned: Profile,
    cands: Sequence[Profile],
    levels: Sequence[int],
    metric: str,
    higher_is_better: bool,
    confidence: float,
) -> DrafterVerdict:
    keys = tuple(c.key for c in cands)
    ok = [c for c in cands if c.equivalent is not False]
    if not ok:
        notes = "; ".join(f"{c.key}: {c.equivalence_note or 'diverged'}" for c in cands)
        return DrafterVerdict(
            method, "flagged", keys, (), None, (), f"greedy output diverged from tuned ({notes})"
        )
    by_key = {c.key: c for c in ok}
    per_level: list[LevelGain] = []
    for lv in levels:
        best: LevelGain | None = None
        for c in ok:
            g = level_gain(tuned, c, lv, metric, higher_is_better, confidence)
            if g is not None and better_gain(g, best):
                best = g
        if best is not None:
            per_level.append(best)
    verified = [g for g in per_level if g.verified]
    pool = verified or [g for g in per_level if g.diff_pct is not None]
    top = max(pool, key=gain_key) if pool else None
    trade = tradeoffs(tuned, by_key[top.trial], top.concurrency) if top else ()
    flagged = [c.key for c in cands if c.equivalent is False]
    extra = f"; kept out (greedy output diverged): {', '.join(flagged)}" if flagged else ""
    if verified:
        reason = (
            f"verified better than tuned at concurrency {', '.join(str(g.concurrency) for g in verified)}"
            f"; best {top.diff_pct:+.1f} % at {top.concurrency} ({top.trial})" + extra  # type: ignore[union-attr]
        )
        runs = verified_runs(per_level)
        if len(runs) > 1:
            reason += "; verified ranges " + ", ".join(f"{lo}–{hi}" for lo, hi in runs)
        rng = next(r for r in runs if r[0] <= top.concurrency <= r[1])  # type: ignore[union-attr]
        return DrafterVerdict(method, "accepted", keys, tuple(per_level), rng, trade, reason, runs)
    few = [g for g in per_level if min(g.n_tuned, g.n_candidate) < MIN_SAMPLES]
    losses = [g for g in per_level if g.verdict == "verified_loss"]
    span = ", ".join(f"{g.concurrency}: {g.diff_pct:+.1f} %" for g in per_level if g.diff_pct is not None)
    if not per_level:
        why = "not enough evidence: no level measured by both it and tuned"
        return DrafterVerdict(method, "not_enough_evidence", keys, (), None, trade, why + extra)
    if few:
        n = min(min(g.n_tuned, g.n_candidate) for g in few)
        why = (
            f"not enough evidence (n={n} at {', '.join(str(g.concurrency) for g in few)}): a verdict needs "
            f">= {MIN_SAMPLES} windows per level on both sides (sweep.repeats >= {MIN_SAMPLES})"
            + (f"; measured so far {span}" if span else "")
        )
        return DrafterVerdict(method, "not_enough_evidence", keys, tuple(per_level), None, trade, why + extra)
    if losses:
        why = (
            f"rejected: verified loss against tuned at {', '.join(str(g.concurrency) for g in losses)} "
            f"and no verified gain anywhere ({span})"
        )
    else:
        why = f"rejected: never verified better than tuned at any concurrency ({span})"
    return DrafterVerdict(method, "rejected", keys, tuple(per_level), None, trade, why + extra)


def verified_runs(per_level: Sequence[LevelGain]) -> tuple[tuple[int, int], ...]:
    """The runs of consecutive measured levels (``per_level``'s order) that are all verified better."""
    runs = [[g.concurrency for g in run] for ok, run in groupby(per_level, key=lambda g: g.verified) if ok]
    return tuple((r[0], r[-1]) for r in runs)


def build_policy(
    tuned: Profile, drafters: Sequence[DrafterVerdict], profiles: Mapping[str, Profile], levels: Sequence[int]
) -> tuple[PolicyRange, ...]:
    """Ordered ranges from concurrency 1 up, speculation only where verified (see the module doc)."""
    choice: dict[int, LevelGain] = {}
    for d in drafters:
        if d.status != "accepted":
            continue
        for g in d.per_level:
            if g.verified and better_gain(g, choice.get(g.concurrency)):
                choice[g.concurrency] = g
    # runs of consecutive measured levels with the same choice (None = tuned)
    runs: list[tuple[str | None, list[int]]] = []
    for lv in sorted(levels):
        key = choice[lv].trial if lv in choice else None
        if runs and runs[-1][0] == key:
            runs[-1][1].append(lv)
        else:
            runs.append((key, [lv]))

    def tuned_range(lo: int, hi: int | None, lvls: list[int]) -> PolicyRange:
        return PolicyRange(
            lo, hi, "tuned", tuned.key, tuned.study, tuned.number, "none", None, tuned.argv, tuple(lvls)
        )

    out: list[PolicyRange] = []
    nxt = 1
    for i, (key, lvls) in enumerate(runs):
        if key is None:
            continue
        lo, hi = lvls[0], lvls[-1]
        if lo > nxt:
            below = [lv for lv in levels if nxt <= lv < lo]
            out.append(tuned_range(nxt, lo - 1, below))
        # up to the next speculative run when one follows at once: speculation is verified on both
        # sides of that gap; before tuned, the range ends at its last verified level
        following = runs[i + 1] if i + 1 < len(runs) else None
        top_c = following[1][0] - 1 if following is not None and following[0] is not None else hi
        p = profiles[key]
        top_level = max(lvls, key=lambda lv: gain_key(choice[lv]))
        top = choice[top_level]
        out.append(
            PolicyRange(
                lo,
                top_c,
                "speculative",
                p.key,
                p.study,
                p.number,
                p.method,
                p.k,
                p.argv,
                tuple(lvls),
                gain_pct=top.diff_pct,
                ci_low=top.ci_low,
                ci_high=top.ci_high,
                gain_level=top_level,
                projected=projection.label(p.config),
            )
        )
        nxt = top_c + 1
    rest = [lv for lv in levels if lv >= nxt]
    out.append(tuned_range(nxt, None, rest))
    return tuple(out)


def build_verdict(
    profiles: Sequence[Profile],
    *,
    metric: str,
    higher_is_better: bool,
    levels: Sequence[int],
    tuned: str | None,
    confidence: float = 0.95,
) -> Verdict:
    """The verdict over a study's feasible COMPLETE trials (``profiles``) against the tuned baseline,
    the profile keyed ``tuned`` (chosen by ``results.select.tuned_baseline``, the one definition)."""
    by_key = {p.key: p for p in profiles}
    stock = next((p for p in profiles if p.role == "stock"), None)
    notes: list[str] = []
    tuned_p = by_key.get(tuned) if tuned else None
    if tuned_p is None:
        return Verdict(
            metric,
            higher_is_better,
            None,
            stock.key if stock else None,
            (),
            (),
            (),
            None,
            "no tuned baseline: no schedule",
            ("no COMPLETE non-speculative trial: nothing to compare against",),
        )
    if (
        stock is not None
        and stock.key != tuned_p.key
        and without_k(stock.config) == without_k(tuned_p.config)
    ):
        notes.append(
            f"the tuned baseline ({tuned_p.key}) runs the stock configuration: no searched configuration "
            "beat it, so tuned vs stock is only run-to-run drift between two measurements of one config"
        )
        # the same configuration twice is an A/A test: a "verified" difference between them says the
        # windows' intervals understate how much two servers of one configuration differ here
        drift = [
            g for lv in levels if (g := level_gain(stock, tuned_p, lv, metric, higher_is_better, confidence))
        ]
        if drifted := [g for g in drift if g.verdict != "not_verified" and g.diff_pct is not None]:
            notes.append(
                f"{stock.key} and {tuned_p.key}, one configuration measured twice, differ beyond their "
                "intervals at "
                + ", ".join(f"{g.concurrency} ({g.diff_pct:+.1f} %)" for g in drifted)
                + ": a drafter's gain or loss no larger than that is not a finding; pair the drafters with "
                "the tuned baseline (confirm) to judge them on the same prompts, side by side"
            )
    vs_stock = tuple(
        (
            lv,
            pct_change(tuned_p.levels.get(lv, {}).get(metric), stock.levels.get(lv, {}).get(metric))
            if stock
            else None,
        )
        for lv in levels
    )
    methods: dict[str, list[Profile]] = {}
    for p in profiles:
        if p.method != "none":
            methods.setdefault(p.method, []).append(p)
    drafters = tuple(
        drafter_verdict(m, tuned_p, cs, levels, metric, higher_is_better, confidence)
        for m, cs in sorted(methods.items())
    )
    gains = [g for d in drafters for g in d.per_level]
    if any(g.paired for g in gains) and (alone := sorted({g.trial for g in gains if not g.paired})):
        notes.append(
            f"{', '.join(alone)} judged on unpaired windows (no ABBA pairs against {tuned_p.key}, unlike "
            "the others): their gains also carry the drift between servers and over time that pairs remove"
        )
    if not drafters:
        notes.append("no speculative trial completed: the policy is the tuned configuration")
    elif not any(d.status == "accepted" for d in drafters):
        unsure = [d.method for d in drafters if d.status == "not_enough_evidence"]
        if unsure:
            notes.append(
                f"not enough evidence to judge {', '.join(unsure)}: measure again with sweep.repeats >= "
                f"{MIN_SAMPLES}; until then the policy is the tuned configuration"
            )
        else:
            notes.append("no drafter clears the bar on this workload: speculative decoding does not pay here")
    if projected := [d for d in drafters if d.projected]:
        notes.append(
            projection.note(", ".join(f"{d.method} ({d.projected})" for d in projected))
            + "; export leaves the synthetic profile out"
        )
    policy = build_policy(tuned_p, drafters, by_key, levels)
    schedule, schedule_note = dynamic_schedule(policy, {key: p.config for key, p in by_key.items()})
    if schedule is not None and (spec_labels := sorted({r.projected for r in policy if r.projected})):
        schedule_note = f"{'; '.join(spec_labels)}: {schedule_note}"
    return Verdict(
        metric=metric,
        higher_is_better=higher_is_better,
        tuned=tuned_p.key,
        stock=stock.key if stock else None,
        tuned_vs_stock=vs_stock,
        drafters=drafters,
        policy=policy,
        schedule=schedule,
        schedule_note=schedule_note,
        notes=tuple(notes),
    )
