"""The report's data: pure functions from ``results.StudyResults`` to plain frozen records and tables.

No storage, no plotting: ``report.html`` draws from these, and they can be tested and exported on
their own. Where data is missing (no stock baseline, no feasible tuned trial, too few trials) the
table is empty and ``ReportData.notes`` says so in words.

- Stock vs tuned: the stock baseline (COMPLETE) against the tuned baseline (``results.select.
  tuned_baseline``, the one every command names), per concurrency: output tok/s and % vs stock;
  TTFT/TPOT/ITL/E2E mean and p99.
- Saturation per trial (``analysis.find_saturation``), speculative acceptance where measured.
- Pareto points and the hypervolume history (computed here, see ``hypervolume``).
- Parameter importances per objective (``optuna.importance.get_param_importances`` on an in-memory
  copy of the complete trials), only with >= 2 complete trials with parameters.
- Cost per 1M output tokens from a $/GPU-hour price: price x GPUs / (tok/s x 3600) x 1e6.
- Capacity at the SLO (``results.capacity_table``): stock, tuned, best, each drafter's best.
- Output tok/s per user against output tok/s per GPU, one point per trial and concurrency level, the
  feasible front marked (``user_gpu_points``: ``vllm bench sweep plot_pareto``'s view; docs/metrics.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from nova_search.analysis.gains import LevelGain, better_gain, pct_change
from nova_search.analysis.saturation import find_saturation
from nova_search.analysis.verdict import Verdict
from nova_search.measure.capacity import usd_per_mtok
from nova_search.measure.metrics import LevelResult
from nova_search.measure.objectives import Objective
from nova_search.report.convergence import (
    HypervolumePoint,
    Importance,
    hypervolume_history,
    param_importances,
)
from nova_search.results.capacity_table import CapacityRow, capacity_rows
from nova_search.results.cost import GpuTime, gpu_time
from nova_search.results.deploy import DeployAnswer, deploy_answer
from nova_search.results.select import ranked_plain, stock_trial, tuned_baseline
from nova_search.results.speculation import verdict_of
from nova_search.results.trials import StudyResults, TrialResult
from nova_search.spec import level_name

LATENCY_METRICS = ("ttft", "tpot", "itl", "e2e")


@dataclass(frozen=True)
class ThroughputRow:
    concurrency: int
    stock_tok_s: float | None
    tuned_tok_s: float | None
    #: (tuned - stock) / stock x 100; None without both
    delta_pct: float | None


@dataclass(frozen=True)
class LatencyRow:
    concurrency: int
    #: "stock" or "tuned"
    which: str
    trial_number: str
    ttft_mean_ms: float | None
    ttft_p99_ms: float | None
    tpot_mean_ms: float | None
    tpot_p99_ms: float | None
    itl_mean_ms: float | None
    itl_p99_ms: float | None
    e2e_mean_ms: float | None
    e2e_p99_ms: float | None


@dataclass(frozen=True)
class SaturationRow:
    trial_number: str
    role: str
    concurrency: int | None
    output_throughput: float | None
    limiter: str | None
    explanation: str


@dataclass(frozen=True)
class AcceptanceRow:
    trial_number: str
    role: str
    method: str | None
    num_speculative_tokens: int | None
    concurrency: int
    acceptance_rate: float | None
    mean_acceptance_length: float | None
    accepted_per_pos: tuple[float, ...] = ()


@dataclass(frozen=True)
class ParetoPoint:
    trial_number: str
    role: str
    values: tuple[float, ...]
    feasible: bool
    on_front: bool


@dataclass(frozen=True)
class UserGpuPoint:
    """One configuration at one concurrency level, as ``vllm bench sweep plot_pareto`` draws it:
    output tok/s per user (the level's output tok/s / its concurrency) against output tok/s per GPU
    (the level's output tok/s / the GPUs the server held, its tensor parallel size)."""

    trial_number: str
    configuration: str
    concurrency: int
    gpus: int
    tok_s_per_user: float
    tok_s_per_gpu: float
    #: the trial met every constraint (an infeasible trial's points are drawn, never on the front)
    feasible: bool
    #: no other feasible point is at least as good on both axes and better on one
    on_front: bool


@dataclass(frozen=True)
class CostRow:
    concurrency: int
    which: str
    trial_number: str
    gpus: int
    tok_s: float
    usd_per_1m_tokens: float


@dataclass(frozen=True)
class TrialRow:
    #: the trial number; a staged study's key (``speculative#3``)
    number: str
    state: str
    role: str
    feasible: bool
    values: tuple[float, ...] | None
    config: str
    reason: str | None
    #: GPUs the server held, and its highest output tok/s per server and per GPU
    gpus: int = 1
    peak_tok_s: float | None = None
    peak_tok_s_per_gpu: float | None = None


@dataclass(frozen=True)
class SpeculativeRow:
    concurrency: int
    stock_tok_s: float | None
    tuned_tok_s: float | None
    tuned_vs_stock_pct: float | None
    #: the best speculative candidate at this level (by its gain vs tuned), its key and method
    spec_trial: str | None
    spec_method: str | None
    spec_tok_s: float | None
    spec_vs_tuned_pct: float | None
    ci_low: float | None
    ci_high: float | None
    verdict: str | None


@dataclass(frozen=True)
class ReportData:
    study_name: str
    storage: str
    objectives: tuple[Objective, ...]
    stock_trial: str | None
    tuned_trial: str | None
    throughput: tuple[ThroughputRow, ...]
    latency: tuple[LatencyRow, ...]
    saturation: tuple[SaturationRow, ...]
    acceptance: tuple[AcceptanceRow, ...]
    pareto: tuple[ParetoPoint, ...]
    hypervolume: tuple[HypervolumePoint, ...]
    hypervolume_reference: tuple[float, ...] | None
    importances: tuple[Importance, ...]
    cost: tuple[CostRow, ...]
    gpu_hour_usd: float | None
    trials: tuple[TrialRow, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: the speculative verdict and policy (None: no speculative trial completed)
    verdict: Verdict | None = None
    #: stock vs tuned vs the best speculative candidate, per concurrency
    speculative: tuple[SpeculativeRow, ...] = ()
    #: where the study's GPU time went (results.cost)
    gpu_time: GpuTime = field(default_factory=GpuTime)
    #: what to deploy (results.deploy): the report's first section
    deploy: DeployAnswer | None = None
    #: output tok/s per user against per GPU, one point per trial and level (``user_gpu_points``)
    user_gpu: tuple[UserGpuPoint, ...] = ()
    #: capacity at the SLO: stock, tuned, best, each drafter's best (``results.capacity_table``)
    capacity: tuple[CapacityRow, ...] = ()
    #: a trace workload's summary (``loadgen.trace.trace_summary``); whether the levels are its speeds
    trace: dict[str, Any] | None = None
    speeds: bool = False


@dataclass(frozen=True)
class TrialCurve:
    """One trial's measured levels, labelled for a chart of a metric against concurrency."""

    trial_number: str
    #: "stock", "tuned" (the tuned baseline) or "candidate" (a runner-up non-speculative trial)
    kind: str
    label: str
    levels: tuple[LevelResult, ...]

    def points(self, metric: str) -> tuple[tuple[int, ...], tuple[float | None, ...]]:
        """(concurrencies, the metric at each), in level order."""
        levels = sorted(self.levels, key=lambda lv: lv.concurrency)
        return tuple(lv.concurrency for lv in levels), tuple(getattr(lv, metric, None) for lv in levels)


def trial_curves(results: StudyResults, *, candidates: int = 3) -> list[TrialCurve]:
    """The curves worth drawing: the stock baseline (COMPLETE), the tuned baseline and up to
    ``candidates`` runner-up non-speculative trials (by the first objective), each with its levels."""
    out = []
    stock, tuned = stock_trial(results), tuned_baseline(results)
    same = stock is not None and tuned is not None and stock.key == tuned.key
    if stock is not None and stock.levels:
        label = f"stock = tuned (trial {stock.key})" if same else f"stock (trial {stock.key})"
        out.append(TrialCurve(stock.key, "stock", label, stock.levels))
    if tuned is not None and tuned.levels and not same:
        out.append(TrialCurve(tuned.key, "tuned", f"tuned (trial {tuned.key})", tuned.levels))
    runners = [t for t in ranked_plain(results)[1:] if t.levels and (stock is None or t.key != stock.key)]
    for t in runners[:candidates]:
        out.append(TrialCurve(t.key, "candidate", f"trial {t.key}", t.levels))
    return out


# ---------------------------------------------------------------- tables


def _concurrencies(*trials: TrialResult | None) -> list[int]:
    return sorted({lv.concurrency for t in trials if t is not None for lv in t.levels})


def throughput_table(stock: TrialResult | None, tuned: TrialResult | None) -> list[ThroughputRow]:
    """Output tok/s per concurrency of stock and tuned, and the tuned gain in % of stock."""
    rows = []
    for c in _concurrencies(stock, tuned):
        s = stock.level(c) if stock else None
        t = tuned.level(c) if tuned else None
        st = s.output_throughput if s else None
        tt = t.output_throughput if t else None
        rows.append(ThroughputRow(c, st, tt, pct_change(tt, st)))
    return rows


def latency_table(stock: TrialResult | None, tuned: TrialResult | None) -> list[LatencyRow]:
    """Mean and p99 of TTFT, TPOT, ITL and E2E per concurrency, stock then tuned."""
    rows = []
    for c in _concurrencies(stock, tuned):
        for which, trial in (("stock", stock), ("tuned", tuned)):
            lv = trial.level(c) if trial else None
            if trial is None or lv is None:
                continue
            stats = {
                f"{m}_{s}_ms": getattr(lv, f"{m}_{s}_ms") for m in LATENCY_METRICS for s in ("mean", "p99")
            }
            rows.append(LatencyRow(c, which, trial.key, **stats))
    return rows


def saturation_table(results: StudyResults) -> list[SaturationRow]:
    """``find_saturation`` of every trial that measured at least two levels (with the per-window
    throughputs when the study measured repeats, so growth is judged against the noise)."""
    rows = []
    for t in results.trials:
        if len(t.levels) < 2:
            continue
        try:
            s = find_saturation(t.levels, t.repeats or None)
        except ValueError as e:
            rows.append(SaturationRow(t.key, t.role, None, None, None, f"not judged: {e}"))
            continue
        rows.append(
            SaturationRow(t.key, t.role, s.concurrency, s.output_throughput, s.limiter, s.explanation)
        )
    return rows


def acceptance_table(results: StudyResults) -> list[AcceptanceRow]:
    """Speculative-decoding acceptance per trial and level, for trials that ran a drafter and
    levels where the engine reported it."""
    rows = []
    for t in results.trials:
        spec = t.config.speculative if t.config else None
        if spec is None:
            continue
        for lv in t.levels:
            if lv.spec_acceptance_rate is None and lv.spec_mean_acceptance_length is None:
                continue
            rows.append(
                AcceptanceRow(
                    t.key,
                    t.role,
                    f"{spec.method} ({t.projected}: synthetic, as asked)" if t.projected else spec.method,
                    spec.num_speculative_tokens,
                    lv.concurrency,
                    lv.spec_acceptance_rate,
                    lv.spec_mean_acceptance_length,
                    tuple(lv.spec_accepted_per_pos),
                )
            )
    return rows


def pareto_points(results: StudyResults) -> list[ParetoPoint]:
    """Every COMPLETE trial's objective values; ``on_front`` for Optuna's Pareto front."""
    return [
        ParetoPoint(t.key, t.role, t.values, t.feasible, results.on_front(t))
        for t in results.complete()
        if t.values is not None
    ]


def user_gpu_points(results: StudyResults) -> list[UserGpuPoint]:
    """Every measured level of every COMPLETE trial as a (tok/s per user, tok/s per GPU) point, the
    front marked: the feasible points no other feasible point dominates (both axes maximized; equal
    points are both on it). Sorted by trial, then concurrency. A level without output tokens is left
    out (nothing to divide)."""
    raw: list[tuple[TrialResult, int, float, float]] = []
    for t in results.complete():
        for lv in sorted(t.levels, key=lambda lv: lv.concurrency):
            if lv.output_throughput is None or lv.output_throughput <= 0 or lv.concurrency <= 0:
                continue
            raw.append(
                (t, lv.concurrency, lv.output_throughput / lv.concurrency, lv.output_throughput / t.gpus)
            )
    feasible = [(u, g) for t, _, u, g in raw if t.feasible]

    def dominated(u: float, g: float) -> bool:
        return any(fu >= u and fg >= g and (fu > u or fg > g) for fu, fg in feasible)

    out = []
    for t, c, u, g in raw:
        label = t.config.label() if t.config else ("vLLM defaults" if t.is_stock else "")
        out.append(
            UserGpuPoint(t.key, label, c, t.gpus, u, g, t.feasible, t.feasible and not dominated(u, g))
        )
    return out


def cost_table(
    stock: TrialResult | None, tuned: TrialResult | None, gpu_hour_usd: float | None
) -> list[CostRow]:
    """$ per 1M output tokens per level: price x GPUs / (tok/s x 3600) x 1e6 (GPUs: the trial's
    tensor_parallel_size, else 1). Empty without a price."""
    if gpu_hour_usd is None:
        return []
    rows = []
    for c in _concurrencies(stock, tuned):
        for which, trial in (("stock", stock), ("tuned", tuned)):
            lv = trial.level(c) if trial else None
            if trial is None or lv is None or not lv.output_throughput or lv.output_throughput <= 0:
                continue
            gpus = trial.config.gpus if trial.config else 1
            usd = usd_per_mtok(gpu_hour_usd, gpus, lv.output_throughput)
            if usd is not None:
                rows.append(CostRow(c, which, trial.key, gpus, lv.output_throughput, usd))
    return rows


def trial_rows(results: StudyResults) -> list[TrialRow]:
    return [
        TrialRow(
            t.key,
            t.state,
            t.role,
            t.feasible,
            t.values,
            t.config.label() if t.config else "",
            None if t.state == "COMPLETE" else (f"{t.reason or ''}: {t.message or ''}".strip(": ") or None),
            t.gpus,
            t.peak_throughput,
            t.peak_throughput_per_gpu,
        )
        for t in results.trials
    ]


# ---------------------------------------------------------------- everything


def speculative_rows(results: StudyResults, verdict: Verdict) -> list[SpeculativeRow]:
    """Per level: stock, tuned (the verdict's baseline) and the best speculative candidate against it."""
    by_key = {t.key: t for t in results.trials}
    tuned = by_key.get(verdict.tuned or "")
    stock = by_key.get(verdict.stock or "")
    best: dict[int, LevelGain] = {}
    for d in verdict.drafters:
        for g in d.per_level:
            if better_gain(g, best.get(g.concurrency)):
                best[g.concurrency] = g
    rows = []
    for c in sorted({lv.concurrency for t in (tuned, stock) if t for lv in t.levels} | set(best)):

        def tok(t: TrialResult | None, c: int = c) -> float | None:
            lv = t.level(c) if t else None
            return lv.output_throughput if lv else None

        g = best.get(c)
        spec = by_key.get(g.trial) if g else None
        rows.append(
            SpeculativeRow(
                concurrency=c,
                stock_tok_s=tok(stock),
                tuned_tok_s=tok(tuned),
                tuned_vs_stock_pct=pct_change(tok(tuned), tok(stock)),
                spec_trial=g.trial if g else None,
                spec_method=(f"{spec.method} ({spec.projected})" if spec.projected else spec.method)
                if spec
                else None,
                spec_tok_s=tok(spec),
                spec_vs_tuned_pct=pct_change(tok(spec), tok(tuned)),
                ci_low=g.ci_low if g else None,
                ci_high=g.ci_high if g else None,
                verdict=g.verdict if g else None,
            )
        )
    return rows


def build_report_data(results: StudyResults, *, gpu_hour_usd: float | None = None) -> ReportData:
    """Every table of the report, with notes wherever data is missing."""
    notes: list[str] = []
    if gpu_hour_usd is not None and not (math.isfinite(gpu_hour_usd) and gpu_hour_usd > 0):
        raise ValueError(f"gpu_hour_usd must be a positive number (got {gpu_hour_usd!r})")
    stock = stock_trial(results)
    tuned = tuned_baseline(results)
    any_stock = results.stock()
    if any_stock is None:
        notes.append("No stock baseline in this study: throughput is shown without % vs stock.")
    elif stock is None:
        why = f" ({any_stock.reason}: {any_stock.message})" if any_stock.reason else ""
        notes.append(
            f"The stock baseline (trial {any_stock.key}) ended {any_stock.state}{why}: no % vs stock."
        )
    if tuned is None:
        notes.append("No feasible COMPLETE non-speculative trial yet: no tuned baseline to compare with.")
    complete = results.complete()
    for t in complete:
        if t.client_bound_levels:
            levels = ", ".join(level_name(c, results.replays_trace) for c in t.client_bound_levels)
            notes.append(
                f"Trial {t.key} was client-bound at {levels}: the load generator (its busiest process past "
                "its CPU share, or a replay's sends behind the trace's schedule) may have set those figures; "
                "its warnings say which. Give the client more cores (sweep.client_cpus) and re-measure."
            )
    if len(complete) < 2:
        notes.append(f"Fewer than 2 COMPLETE trials ({len(complete)}): little to compare yet.")
    history, reference = hypervolume_history(results)
    if not history:
        notes.append("No feasible COMPLETE trial: no Pareto front and no hypervolume history.")
    importances, imp_note = param_importances(results)
    if imp_note:
        notes.append(imp_note + ".")
    acceptance = acceptance_table(results)
    if not acceptance:
        notes.append("No trial reported speculative-decoding acceptance (no drafter, or no engine metrics).")
    cost = cost_table(stock, tuned, gpu_hour_usd)
    if gpu_hour_usd is None:
        notes.append("Cost omitted: give a price with --gpu-hour-usd.")
    saturation = saturation_table(results)
    if not saturation:
        notes.append("No trial measured two or more levels: saturation cannot be judged.")
    verdict = None
    full = verdict_of(results) if results.objectives else None
    if any(t.speculative for t in complete):
        verdict = full
    else:
        notes.append(
            "No speculative trial completed: no verdict on speculation (What to deploy, the first section, "
            "says what to run)."
        )
    return ReportData(
        study_name=results.study_name,
        storage=results.storage,
        objectives=results.objectives,
        stock_trial=stock.key if stock else None,
        tuned_trial=tuned.key if tuned else None,
        verdict=verdict,
        speculative=tuple(speculative_rows(results, verdict)) if verdict else (),
        throughput=tuple(throughput_table(stock, tuned)),
        latency=tuple(latency_table(stock, tuned)),
        saturation=tuple(saturation),
        acceptance=tuple(acceptance),
        pareto=tuple(pareto_points(results)),
        hypervolume=tuple(history),
        hypervolume_reference=reference,
        importances=tuple(importances),
        cost=tuple(cost),
        gpu_hour_usd=gpu_hour_usd,
        trials=tuple(trial_rows(results)),
        notes=tuple(notes),
        gpu_time=gpu_time(results),
        deploy=deploy_answer(results, full),
        user_gpu=tuple(user_gpu_points(results)),
        capacity=capacity_rows(results),
        trace=results.trace,
        speeds=results.replays_trace,
    )
