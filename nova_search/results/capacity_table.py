"""Capacity at the SLO as the reader sees it: one ``CapacityRow`` per trial whose capacity search ran
(``measure.capacity.Capacity``), and ``capacity_rows``, the table every reader shows (status, the report,
the study note, the deploy answer): stock, tuned, the best by capacity per GPU, and the best of each
drafter. A pure function of ``StudyResults``; the row is the JSON output's record (``results.model``).
"""

from __future__ import annotations

from typing import Literal

from nova_search.measure.capacity import Capacity
from nova_search.measure.objectives import Objective
from nova_search.results.model import OutputModel
from nova_search.results.select import ranked, stock_trial, tuned_baseline
from nova_search.results.trials import StudyResults, TrialResult

#: how the table ranks: capacity per GPU, most first
BY_CAPACITY = Objective("capacity_per_gpu", "maximize")


class CapacityRow(OutputModel):
    """One trial's capacity at the SLO (docs/metrics.md, Capacity)."""

    #: stock, tuned, best (by capacity per GPU) or the drafter's method (``drafter ngram``); several
    #: joined by `` / `` where one trial plays each part
    which: str
    #: the trial's key
    trial: str
    #: found, none (no load tried meets the SLO) or indeterminate (some straddle it: no number)
    status: Literal["found", "none", "indeterminate"]
    #: the SLO, as text (``p99 ttft <= 500 ms``)
    slo: str
    #: what the load is: concurrency (closed loop) or rate (requests a second, Poisson)
    unit: Literal["concurrency", "rate"]
    #: the largest load that meets the SLO; null unless found
    load: float | None
    #: the smallest load above it that was measured and does not meet it; null: none measured
    above: float | None
    #: requests a second carried at the SLO, by the trial's server and per GPU it held (0: none)
    capacity_rps: float | None
    capacity_rps_per_gpu: float | None
    gpus: int
    #: output tokens a second at capacity
    output_tok_s: float | None
    #: $ per million output tokens at capacity; null without a price (``cost_note`` says why)
    cost_per_mtok: float | None
    cost_note: str
    #: joules per output token at capacity (the GPUs' energy over the window); null on the CPU build or
    #: without power samples (``energy_note`` says why): absent, never zero
    joules_per_token: float | None
    mean_power_w: float | None
    energy_note: str
    #: probes measured; whether the search ended, and whether its bracket is within the tolerance
    probes: int
    done: bool
    converged: bool
    #: one line: what the search found
    text: str


class BoundRow(OutputModel):
    """One bound of the SLO: ``percentile`` % of requests have ``metric`` at most ``max_ms``."""

    metric: Literal["ttft", "tpot", "itl", "e2e"]
    percentile: float
    max_ms: float


class CheckRow(OutputModel):
    """One check of a probe: a bound (or ``all bounds``, against the target) met by ``met`` of ``of``
    requests, the share's Wilson interval, and its verdict against ``threshold``."""

    what: str
    threshold: float
    met: int
    of: int
    share: float | None
    low: float
    high: float
    verdict: Literal["meets", "misses", "straddles"]


class ProbeRow(OutputModel):
    """One window of the capacity search at one load."""

    load: float
    verdict: Literal["meets", "misses", "straddles"]
    #: requests measured, planned (null: a window of a duration), and how many met every bound
    measured: int
    planned: int | None
    met: int
    #: the share of measured requests that met every bound, and its interval
    attainment: float | None
    low: float
    high: float
    checks: list[CheckRow]
    duration_s: float
    request_throughput: float
    output_throughput: float
    output_tokens: int
    #: abandoned once clearly over saturation
    abandoned: bool
    #: the GPUs' energy over the window (J); null: not measured
    energy_j: float | None


class SearchRow(OutputModel):
    """How the search was set: the load's unit, first load, floor, ceiling, tolerance, most probes."""

    unit: Literal["concurrency", "rate"]
    start: float
    floor: float
    ceiling: float
    tolerance: float
    max_probes: int


class CapacityRecord(CapacityRow):
    """A trial's capacity search in full, as ``dump`` writes it: the row, then the SLO, the search and
    every probe."""

    bounds: list[BoundRow]
    #: the share of requests that must meet every bound at once (null: each bound's percentile only)
    target: float | None
    confidence: float
    search: SearchRow
    probe_windows: list[ProbeRow]


def capacity_record(t: TrialResult) -> CapacityRecord | None:
    """Trial ``t``'s capacity search in full (None when it did not run)."""
    row, c = capacity_row("trial", t), t.capacity
    if row is None or c is None:
        return None
    probes = [
        ProbeRow(
            load=p.load,
            verdict=p.verdict,
            measured=p.counts.measured,
            planned=p.counts.planned,
            met=p.counts.met,
            attainment=p.judgement.attainment,
            low=p.judgement.low,
            high=p.judgement.high,
            checks=[CheckRow(**k.as_dict()) for k in p.judgement.checks],
            duration_s=p.duration_s,
            request_throughput=p.request_throughput,
            output_throughput=p.output_throughput,
            output_tokens=p.output_tokens,
            abandoned=p.abandoned,
            energy_j=p.energy_j,
        )
        for p in c.probes
    ]
    return CapacityRecord(
        **dict(row),
        bounds=[BoundRow(**b.as_dict()) for b in c.slo.bounds],
        target=c.slo.target,
        confidence=c.slo.confidence,
        search=SearchRow(**c.plan.as_dict()),
        probe_windows=probes,
    )


def capacity_row(which: str, t: TrialResult) -> CapacityRow | None:
    """The row of trial ``t`` (None when its capacity search did not run)."""
    c: Capacity | None = t.capacity
    if c is None:
        return None
    above = c.above
    return CapacityRow(
        which=which,
        trial=t.key,
        status=c.status,
        slo=c.slo.name,
        unit=c.plan.unit,
        load=c.load,
        above=above.load if above else None,
        capacity_rps=c.capacity,
        capacity_rps_per_gpu=c.capacity_per_gpu,
        gpus=c.gpus,
        output_tok_s=c.output_throughput,
        cost_per_mtok=c.cost_per_mtok,
        cost_note=c.cost_note,
        joules_per_token=c.joules_per_token,
        mean_power_w=c.mean_power_w,
        energy_note=c.energy_note,
        probes=len(c.probes),
        done=c.done,
        converged=c.converged,
        text=c.text(),
    )


def capacity_rows(results: StudyResults) -> tuple[CapacityRow, ...]:
    """Stock, tuned, the best by capacity per GPU, and each drafter's best (where each has a capacity);
    one row per trial (``which`` names every part it plays: ``stock / tuned / best``)."""
    rows: list[CapacityRow | None] = []
    stock = stock_trial(results)
    if stock is not None:
        rows.append(capacity_row("stock", stock))
    tuned = tuned_baseline(results)
    if tuned is not None:
        rows.append(capacity_row("tuned", tuned))
    measured = [t for t in results.feasible() if t.capacity is not None]
    top = ranked(measured, BY_CAPACITY)
    if top:
        rows.append(capacity_row("best", top[0]))
    for method in dict.fromkeys(t.method for t in measured if t.speculative):
        best = ranked([t for t in measured if t.method == method], BY_CAPACITY)
        if best:
            rows.append(capacity_row(f"drafter {method}", best[0]))
    merged: dict[str, CapacityRow] = {}  # a trial that is several of these is one row: "stock / tuned"
    for r in rows:
        if r is not None:
            seen = merged.get(r.trial)
            merged[r.trial] = (
                r if seen is None else seen.model_copy(update={"which": f"{seen.which} / {r.which}"})
            )
    return tuple(merged.values())
