"""The report's data: pure functions from ``api.StudyResults`` to plain frozen records and tables.

No storage, no plotting: ``report.html`` draws from these, and they can be tested and exported on
their own. Where data is missing (no stock baseline, no feasible tuned trial, too few trials) the
table is empty and ``ReportData.notes`` says so in words.

- Stock vs tuned: the stock baseline (``nova:role = stock``, COMPLETE) against the best tuned trial
  (the best non-stock feasible COMPLETE trial by the study's first objective), per concurrency:
  output tok/s and % vs stock; TTFT/TPOT/ITL/E2E mean and p99.
- Saturation per trial (``analysis.find_saturation``), speculative acceptance where measured.
- Pareto points and the hypervolume history (computed here, see ``hypervolume``).
- Parameter importances per objective (``optuna.importance.get_param_importances`` on an in-memory
  copy of the complete trials), only with >= 2 complete trials with parameters.
- Cost per 1M output tokens from a $/GPU-hour price: price x GPUs / (tok/s x 3600) x 1e6.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

from nova_search.analysis.saturation import find_saturation
from nova_search.analysis.verdict import LevelGain, Verdict, better_gain, pct_change
from nova_search.api import Objective, StudyResults, TrialResult, objective_of, verdict_of
from nova_search.metrics import LevelResult

LATENCY_METRICS = ("ttft", "tpot", "itl", "e2e")
#: importances need at least this many complete trials with parameters
MIN_IMPORTANCE_TRIALS = 2


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
    trial_number: int
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
    trial_number: int
    role: str
    concurrency: int | None
    output_throughput: float | None
    limiter: str | None
    explanation: str


@dataclass(frozen=True)
class AcceptanceRow:
    trial_number: int
    role: str
    method: str | None
    num_speculative_tokens: int | None
    concurrency: int
    acceptance_rate: float | None
    mean_acceptance_length: float | None
    accepted_per_pos: tuple[float, ...] = ()


@dataclass(frozen=True)
class ParetoPoint:
    trial_number: int
    role: str
    values: tuple[float, ...]
    feasible: bool
    on_front: bool


@dataclass(frozen=True)
class HypervolumePoint:
    #: the trial whose completion this point follows
    trial_number: int
    hypervolume: float


@dataclass(frozen=True)
class Importance:
    objective: str
    #: (parameter, importance), most important first; empty when it could not be computed
    importances: tuple[tuple[str, float], ...]
    note: str = ""


@dataclass(frozen=True)
class CostRow:
    concurrency: int
    which: str
    trial_number: int
    gpus: int
    tok_s: float
    usd_per_1m_tokens: float


@dataclass(frozen=True)
class TrialRow:
    #: the trial number; a staged study's key (``speculative#3``)
    number: int | str
    state: str
    role: str
    feasible: bool
    values: tuple[float, ...] | None
    config: str
    reason: str | None


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
    stock_trial: int | None
    tuned_trial: int | None
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


# ---------------------------------------------------------------- choosing


def stock_trial(results: StudyResults) -> TrialResult | None:
    """The COMPLETE stock baseline, None when there is none (or it did not complete)."""
    t = results.stock()
    return t if t is not None and t.state == "COMPLETE" else None


def best_tuned(results: StudyResults) -> TrialResult | None:
    """The best non-stock feasible COMPLETE trial by the study's first objective."""
    ranked = ranked_tuned(results)
    return ranked[0] if ranked else None


def ranked_tuned(results: StudyResults) -> list[TrialResult]:
    """The non-stock feasible COMPLETE trials, best first by the study's first objective (ties: the
    lower number); ``best_tuned`` is the first of them."""
    if not results.objectives:
        return []
    primary = results.objectives[0]
    pool = [t for t in results.feasible() if not t.is_stock and objective_of(t, primary) is not None]

    def key(t: TrialResult) -> tuple[float, int]:
        v = objective_of(t, primary)
        assert v is not None
        return (-v if primary.maximize else v, t.number)

    return sorted(pool, key=key)


@dataclass(frozen=True)
class TrialCurve:
    """One trial's measured levels, labelled for a chart of a metric against concurrency."""

    trial_number: int
    #: "stock", "best tuned" or "candidate" (a leading tuned trial after the best)
    kind: str
    label: str
    levels: tuple[LevelResult, ...]

    def points(self, metric: str) -> tuple[tuple[int, ...], tuple[float | None, ...]]:
        """(concurrencies, the metric at each), in level order."""
        levels = sorted(self.levels, key=lambda lv: lv.concurrency)
        return tuple(lv.concurrency for lv in levels), tuple(getattr(lv, metric, None) for lv in levels)


def trial_curves(results: StudyResults, *, candidates: int = 3) -> list[TrialCurve]:
    """The curves worth drawing: the stock baseline (COMPLETE), the best tuned trial and up to
    ``candidates`` leading tuned trials after it (by the first objective), each with its levels."""
    out = []
    stock = stock_trial(results)
    if stock is not None and stock.levels:
        out.append(TrialCurve(stock.number, "stock", f"stock (trial {stock.number})", stock.levels))
    ranked = [t for t in ranked_tuned(results) if t.levels]
    for i, t in enumerate(ranked[: candidates + 1]):
        kind, label = (
            ("best tuned", f"best tuned (trial {t.number})") if i == 0 else ("candidate", f"trial {t.number}")
        )
        out.append(TrialCurve(t.number, kind, label, t.levels))
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
            rows.append(LatencyRow(c, which, trial.number, **stats))
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
            rows.append(SaturationRow(t.number, t.role, None, None, None, f"not judged: {e}"))
            continue
        rows.append(
            SaturationRow(t.number, t.role, s.concurrency, s.output_throughput, s.limiter, s.explanation)
        )
    return rows


def acceptance_table(results: StudyResults) -> list[AcceptanceRow]:
    """Speculative-decoding acceptance per trial and level, for trials that ran a drafter and
    levels where the engine reported it."""
    rows = []
    for t in results.trials:
        spec = t.config.get("speculative") or {}
        if not spec:
            continue
        for lv in t.levels:
            if lv.spec_acceptance_rate is None and lv.spec_mean_acceptance_length is None:
                continue
            k = spec.get("num_speculative_tokens")
            rows.append(
                AcceptanceRow(
                    t.number,
                    t.role,
                    spec.get("method"),
                    int(k) if isinstance(k, int) else None,
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
        ParetoPoint(t.number, t.role, t.values, t.feasible, results.on_front(t))
        for t in results.complete()
        if t.values is not None
    ]


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
            tp = trial.config.get("tensor_parallel_size")
            gpus = int(tp) if isinstance(tp, int) and tp > 0 else 1
            usd = gpu_hour_usd * gpus / (lv.output_throughput * 3600.0) * 1e6
            rows.append(CostRow(c, which, trial.number, gpus, lv.output_throughput, usd))
    return rows


def trial_rows(results: StudyResults) -> list[TrialRow]:
    from nova_search.trial import describe_dict

    return [
        TrialRow(
            t.number if t.stage == "joint" else t.key,
            t.state,
            t.role,
            t.feasible,
            t.values,
            describe_dict(t.config) if t.config else "",
            None if t.state == "COMPLETE" else (f"{t.reason or ''}: {t.message or ''}".strip(": ") or None),
        )
        for t in results.trials
    ]


# ---------------------------------------------------------------- hypervolume


def hypervolume(points: Sequence[Sequence[float]], reference: Sequence[float]) -> float:
    """The volume dominated by ``points`` (all objectives minimized) and bounded by ``reference``.
    Exact: a sweep in 2-D, slicing along the last objective above that. Points that do not
    strictly dominate the reference add nothing."""
    pts = [tuple(p) for p in points if all(a < r for a, r in zip(p, reference, strict=True))]
    if not pts:
        return 0.0
    dim = len(reference)
    if dim == 1:
        return reference[0] - min(p[0] for p in pts)
    if dim == 2:
        vol, best_y = 0.0, reference[1]
        for x, y in sorted(pts):
            if y < best_y:
                vol += (reference[0] - x) * (best_y - y)
                best_y = y
        return vol
    pts.sort(key=lambda p: p[-1])
    vol = 0.0
    for i, p in enumerate(pts):
        upper = pts[i + 1][-1] if i + 1 < len(pts) else reference[-1]
        if upper > p[-1]:
            vol += (upper - p[-1]) * hypervolume([q[:-1] for q in pts[: i + 1]], reference[:-1])
    return vol


def _minimized(values: Sequence[float], objectives: Sequence[Objective]) -> tuple[float, ...]:
    return tuple(-v if o.maximize else v for v, o in zip(values, objectives, strict=True))


def hypervolume_history(
    results: StudyResults, margin: float = 0.1
) -> tuple[list[HypervolumePoint], tuple[float, ...] | None]:
    """The hypervolume of the feasible COMPLETE trials after each one completes (in completion
    order). The reference point is the worst value of each objective over those trials, moved
    ``margin`` of the objective's range further (so the extreme points count); it is returned in
    the objectives' own units and directions."""
    objs = results.objectives
    done = [t for t in results.feasible() if t.values is not None and len(t.values) == len(objs)]
    if not objs or not done:
        return [], None
    done.sort(key=lambda t: (t.datetime_complete is None, t.datetime_complete or 0, t.number))
    mins = [_minimized(t.values, objs) for t in done]  # type: ignore[arg-type]
    ref = []
    for i in range(len(objs)):
        col = [m[i] for m in mins]
        span = max(col) - min(col)
        ref.append(max(col) + (margin * span if span > 0 else max(abs(max(col)) * margin, 1e-9)))
    history = [HypervolumePoint(t.number, hypervolume(mins[: i + 1], ref)) for i, t in enumerate(done)]
    reference = tuple(-r if o.maximize else r for r, o in zip(ref, objs, strict=True))
    return history, reference


# ---------------------------------------------------------------- importances


def param_importances(results: StudyResults) -> tuple[list[Importance], str | None]:
    """Optuna's parameter importances per objective over the COMPLETE trials with parameters.
    Returns (importances, note); the note says why there are none or what failed."""
    import optuna
    from optuna.distributions import json_to_distribution
    from optuna.trial import TrialState, create_trial

    objs = results.objectives
    pool = [t for t in results.complete() if t.params and t.values is not None and len(t.values) == len(objs)]
    if len(pool) < MIN_IMPORTANCE_TRIALS:
        return [], (
            f"parameter importances need at least {MIN_IMPORTANCE_TRIALS} COMPLETE trials with searched "
            f"parameters (this study has {len(pool)})"
        )
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.ERROR)  # no "A new study created in memory" line
    try:
        study = optuna.create_study(directions=[o.direction for o in objs])
    finally:
        optuna.logging.set_verbosity(verbosity)
    try:
        for t in pool:
            study.add_trial(
                create_trial(
                    params=t.params,
                    distributions={k: json_to_distribution(v) for k, v in t.distributions.items()},
                    values=list(t.values),  # type: ignore[arg-type]
                    state=TrialState.COMPLETE,
                )
            )
    except Exception as e:  # noqa: BLE001 - a stored trial Optuna cannot re-read: say so, carry on
        return [], f"parameter importances not computed: {type(e).__name__}: {e}"
    out = []
    for i, o in enumerate(objs):
        sign = -1.0 if o.maximize else 1.0  # evaluators that read "low is good" see the better side
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                imp = optuna.importance.get_param_importances(
                    study, target=lambda t, i=i, s=sign: s * t.values[i]
                )
            pairs = tuple((k, float(v)) for k, v in imp.items() if math.isfinite(float(v)))
            out.append(Importance(o.name, pairs, "" if pairs else "no parameter varies enough to rank"))
        except Exception as e:  # noqa: BLE001 - importances are a nicety: note the failure
            out.append(Importance(o.name, (), f"not computed: {type(e).__name__}: {e}"))
    return out, None


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
                spec_method=str((spec.config.get("speculative") or {}).get("method")) if spec else None,
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
    tuned = best_tuned(results)
    any_stock = results.stock()
    if any_stock is None:
        notes.append("No stock baseline in this study: throughput is shown without % vs stock.")
    elif stock is None:
        why = f" ({any_stock.reason}: {any_stock.message})" if any_stock.reason else ""
        notes.append(
            f"The stock baseline (trial {any_stock.number}) ended {any_stock.state}{why}: no % vs stock."
        )
    if tuned is None:
        notes.append("No feasible COMPLETE tuned (non-stock) trial yet: nothing to compare with stock.")
    complete = results.complete()
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
    if any((t.config or {}).get("speculative") for t in complete):
        verdict = verdict_of(results)
    else:
        notes.append("No speculative trial completed: no verdict and no policy.")
    return ReportData(
        study_name=results.study_name,
        storage=results.storage,
        objectives=results.objectives,
        stock_trial=stock.number if stock else None,
        tuned_trial=tuned.number if tuned else None,
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
    )
