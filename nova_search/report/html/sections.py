"""The report's sections, in order (``SECTIONS``): each a small function from ``ReportData`` to a
``Section`` of typed parts, with a plain sentence wherever data is missing. The report opens with
"What to deploy", the deploy answer (``results.deploy``) that ``policy``, ``status``, the study note
and ``export`` give too.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import plotly.graph_objects as go

from nova_search.report.data import LATENCY_METRICS, ReportData
from nova_search.report.figures import user_gpu_figure
from nova_search.report.html.parts import Part, Section, figure_div, missing_note, paragraph, table
from nova_search.report.html.plots import (
    acceptance_figure,
    hypervolume_figure,
    importance_figure,
    latency_figure,
    pareto_figure,
    throughput_figure,
    trace_figure,
)
from nova_search.report.policy import (
    ANSWER_HEADERS,
    DRAFTER_HEADERS,
    POLICY_HEADERS,
    TRADEOFF_HEADERS,
    answer_heading,
    answer_rows,
    deploy_what,
    drafter_rows,
    export_commands,
    header_lines,
    one_server_command,
    policy_rows,
    projection_lines,
    tradeoff_rows,
)

#: the trial table's columns for the GPUs a server held and its output throughput per server and per GPU
PER_GPU_HEADERS = ("GPUs", "peak out tok/s", "peak out tok/s per GPU")


def _section(title: str, parts: list[Part], id: str = "") -> Section:
    return Section(title, tuple(parts), id)


def _with_figure(parts: list[Part], make: Callable[[ReportData], go.Figure | None], data: ReportData) -> None:
    fig = make(data)
    if fig is not None:
        parts.append(figure_div(fig))


def deploy_section(data: ReportData) -> Section:
    """What to deploy: the deploy answer, as ``policy`` prints it."""
    title = "What to deploy"
    a = data.deploy
    if a is None:
        return _section(title, [missing_note("No deploy answer: the study has no objectives.")], "deploy")
    parts = [paragraph(answer_heading(a) + ".")]
    if not a.ranges:
        return _section(title, [*parts, missing_note(f"Nothing to deploy yet: {a.reason}")], "deploy")
    parts.append(table(ANSWER_HEADERS, answer_rows(a), "deploy"))
    one = one_server_command(a)  # every range is this one server: its command once, under the schedule
    if one is None:
        for r in a.ranges:
            parts += [
                paragraph(f"{r.label} ({deploy_what(r)}, trial {r.configuration.trial}):"),
                Part("pre", text=r.command),
            ]
    if a.schedule:
        parts.append(
            Part(
                "code",
                text="One server, dynamic schedule (num_speculative_tokens_per_batch_size): ",
                code=json.dumps([list(x) for x in a.schedule]),
                after=f" ({a.schedule_note})",
            )
        )
    if one is not None:
        parts.append(Part("pre", text=one))
    for what, command in export_commands(a):
        parts += [paragraph(f"{what}:"), Part("pre", text=command)]
    if a.export_needs:
        parts.append(missing_note(f"Before deploying: {a.export_needs}"))
    return _section(title, parts, "deploy")


def summary_section(data: ReportData) -> Section:
    objs = ", ".join(f"{o.name} ({o.direction})" for o in data.objectives) or "none"
    rows = [[data.study_name, data.storage, objs, data.stock_trial, data.tuned_trial]]
    parts = [table(["study", "storage", "objectives", "stock trial", "tuned trial"], rows, "summary")]
    parts += [missing_note(n) for n in data.notes]
    return _section("Summary", parts)


def trace_section(data: ReportData) -> Section | None:
    """A trace workload: what was replayed (size, rate, prefix reuse) and its histograms; None (no
    section) for other workloads."""
    t = data.trace
    if not t:
        return None
    headers = ["file", "format", "requests", "seconds", "requests/s", "left out (no output)"]
    headers += ["block tokens", "prefix reuse", "slice from (s)"]
    row = [t["path"], t["format"], t["requests"], t["duration_s"], t["rate"], t["no_output"]]
    row += [t["block_size"], t["prefix_reuse"], t["start_s"]]
    parts = [table(headers, [row], "trace")]
    if data.speeds:
        parts.append(
            paragraph(
                "The levels are speeds of this trace, keyed in percent of its own rate: the level 200 in the "
                "tables of this report is the trace replayed at twice its rate, 50 at half of it."
            )
        )
    parts.append(
        paragraph(
            "Prefix reuse: the share of prompt tokens in a hash_ids block an earlier request had (what a "
            "prefix cache that never evicts would hit over the whole trace)."
        )
    )
    _with_figure(parts, trace_figure, data)
    return _section("The trace", parts, "trace")


def throughput_section(data: ReportData) -> Section:
    title = "Stock vs tuned: output throughput"
    if not data.throughput:
        return _section(title, [missing_note("No stock baseline and no tuned trial measured any level.")])
    rows = [[r.concurrency, r.stock_tok_s, r.tuned_tok_s, r.delta_pct] for r in data.throughput]
    parts = [table(["concurrency", "stock tok/s", "tuned tok/s", "% vs stock"], rows, "throughput")]
    _with_figure(parts, throughput_figure, data)
    return _section(title, parts)


#: the speculative section's table: per level, stock, tuned and the best speculative trial
SPECULATIVE_HEADERS = (
    "concurrency",
    "stock tok/s",
    "tuned tok/s",
    "tuned vs stock",
    "best speculative",
    "speculative tok/s",
    "vs tuned",
    "95 % interval",
    "verdict",
)


def speculative_rows(data: ReportData) -> list[list[Any]]:
    return [
        [
            r.concurrency,
            r.stock_tok_s,
            r.tuned_tok_s,
            r.tuned_vs_stock_pct,
            f"{r.spec_trial} ({r.spec_method})" if r.spec_trial else None,
            r.spec_tok_s,
            r.spec_vs_tuned_pct,
            f"[{r.ci_low:+.1f}, {r.ci_high:+.1f}]"
            if r.ci_low is not None and r.ci_high is not None
            else None,
            r.verdict,
        ]
        for r in data.speculative
    ]


def verdict_section(data: ReportData) -> Section:
    title = "Stock vs tuned vs speculative, the verdict and the policy"
    v = data.verdict
    if v is None:
        missing = (
            "No speculative trial completed: no verdict on speculation (What to deploy says what to run)."
        )
        return _section(title, [missing_note(missing)])
    projected = [d.projected for d in v.drafters if d.projected]
    parts = [paragraph(line) for line in [*projection_lines(projected), *header_lines(v)]]
    parts.append(table(SPECULATIVE_HEADERS, speculative_rows(data), "speculative"))
    if v.drafters:
        parts += [Part("h3", text="Drafters"), table(DRAFTER_HEADERS, drafter_rows(v), "drafters")]
    for d in v.drafters:
        if d.tradeoffs:
            parts += [
                Part(
                    "h3", text=f"Latency tradeoffs: {d.method}" + (f" ({d.projected})" if d.projected else "")
                ),
                table(TRADEOFF_HEADERS, tradeoff_rows(d), "tradeoffs"),
            ]
    parts += [Part("h3", text="Deployment policy"), table(POLICY_HEADERS, policy_rows(v), "policy")]
    if v.schedule:
        parts.append(
            Part(
                "code",
                text="Dynamic schedule (num_speculative_tokens_per_batch_size): ",
                code=json.dumps([list(x) for x in v.schedule]),
                after=f" ({v.schedule_note})",
            )
        )
    parts += [missing_note(n) for n in v.notes]
    return _section(title, parts)


def latency_section(data: ReportData) -> Section:
    if not data.latency:
        return _section(
            "Latency",
            [missing_note("No latency to compare: neither a stock nor a tuned trial measured a level.")],
        )
    stats = [(m, s) for m in LATENCY_METRICS for s in ("mean", "p99")]
    headers = ["concurrency", "which", "trial"] + [f"{m.upper()} {s} (ms)" for m, s in stats]
    rows = [
        [r.concurrency, r.which, r.trial_number] + [getattr(r, f"{m}_{s}_ms") for m, s in stats]
        for r in data.latency
    ]
    parts = [table(headers, rows, "latency")]
    _with_figure(parts, latency_figure, data)
    return _section("Latency", parts)


def cost_section(data: ReportData) -> Section:
    title = "Cost per 1M output tokens"
    if not data.cost:
        missing = (
            "No price given (--gpu-hour-usd): cost per 1M tokens omitted."
            if data.gpu_hour_usd is None
            else "No level with output throughput to price."
        )
        return _section(title, [missing_note(missing)])
    headers = ["concurrency", "which", "trial", "GPUs", "tok/s", "$ per 1M output tokens"]
    rows = [[r.concurrency, r.which, r.trial_number, r.gpus, r.tok_s, r.usd_per_1m_tokens] for r in data.cost]
    return _section(
        title,
        [
            paragraph(f"At ${data.gpu_hour_usd:g} per GPU-hour: price x GPUs / (tok/s x 3600) x 1e6."),
            table(headers, rows, "cost"),
        ],
    )


CAPACITY_HEADERS = (
    "which",
    "trial",
    "status",
    "load",
    "req/s",
    "req/s per GPU",
    "out tok/s",
    "$ per 1M output tokens",
    "J per token",
)


def capacity_section(data: ReportData) -> Section:
    """Capacity at the SLO: stock, tuned, best, each drafter's best (``results.capacity_table``)."""
    title = "Capacity at the SLO"
    if not data.capacity:
        return _section(
            title, [missing_note("No capacity search in this study (spec `capacity`).")], "capacity"
        )
    rows = [
        [
            c.which,
            c.trial,
            c.status if c.done else f"{c.status} (searching)",
            c.load,
            c.capacity_rps,
            c.capacity_rps_per_gpu,
            c.output_tok_s,
            c.cost_per_mtok,
            c.joules_per_token,
        ]
        for c in data.capacity
    ]
    parts = [
        paragraph(
            f"The most load each trial carries at {data.capacity[0].slo}: doubling then bisection inside the "
            "trial; indeterminate where a load's interval straddles the SLO (no number is made up)."
        ),
        table(list(CAPACITY_HEADERS), rows, "capacity"),
    ]
    parts += [paragraph(f"{c.which} (trial {c.trial}): {c.text}") for c in data.capacity]
    notes = dict.fromkeys(n for c in data.capacity for n in (c.cost_note, c.energy_note) if n)
    parts += [paragraph(n) for n in notes]
    return _section(title, parts, "capacity")


#: how the search-cost table names where the GPU time went
GPU_TIME_PLACES = {"windows": "inside measurement windows", "boot": "booting", "failed_boot": "failed boots"}


def gpu_time_section(data: ReportData) -> Section:
    g = data.gpu_time
    parts = [paragraph(g.text())]
    held = g.held_text()
    if held is not None:
        parts.append(paragraph(held))
    if g.total > 0:
        rows = [
            [GPU_TIME_PLACES.get(p, "other"), round(s, 1), f"{g.share(p):.0%}"]
            for p, s in g.seconds().items()
        ]
        parts.append(table(["where", f"{g.unit}-seconds", "share"], rows, "gpu-time"))
    return _section(f"Search cost: where the {g.label} went", parts)


def pareto_section(data: ReportData) -> Section:
    if not data.pareto:
        return _section("Pareto front", [missing_note("No COMPLETE trial: no objective values to show.")])
    headers = ["trial", "role", *(o.name for o in data.objectives), "feasible", "on the Pareto front"]
    rows = [[p.trial_number, p.role, *p.values, p.feasible, p.on_front] for p in data.pareto]
    parts = [table(headers, rows, "pareto")]
    _with_figure(parts, pareto_figure, data)
    return _section("Pareto front", parts)


def user_gpu_section(data: ReportData) -> Section:
    """Output tok/s per user against per GPU (report.data.user_gpu_points; docs/metrics.md)."""
    title = "Output tok/s per user vs per GPU"
    fig = user_gpu_figure(data.user_gpu)
    if fig is None:
        return _section(title, [missing_note("No COMPLETE trial measured a level: no point to draw.")])
    return _section(title, [figure_div(fig)])


def hypervolume_section(data: ReportData) -> Section:
    title = "Hypervolume history"
    if not data.hypervolume:
        return _section(title, [missing_note("No feasible COMPLETE trial: no hypervolume history.")])
    ref = ", ".join(
        f"{o.name}={v:.4g}" for o, v in zip(data.objectives, data.hypervolume_reference or (), strict=False)
    )
    rows = [[p.trial_number, p.hypervolume] for p in data.hypervolume]
    parts = [
        paragraph(
            f"Reference point (each objective's worst feasible value, 10 % of its range further): {ref}."
        ),
        table(["after trial", "hypervolume"], rows, "hypervolume"),
    ]
    _with_figure(parts, hypervolume_figure, data)
    return _section(title, parts)


def importance_section(data: ReportData) -> Section:
    title = "Parameter importances"
    if not data.importances:
        missing = "Parameter importances need at least 2 COMPLETE trials with searched parameters."
        return _section(title, [missing_note(missing)])
    rows: list[list[Any]] = [
        [imp.objective, k, v, ""] for imp in data.importances for k, v in imp.importances
    ]
    rows += [[imp.objective, "", None, imp.note] for imp in data.importances if not imp.importances]
    parts = [table(["objective", "parameter", "importance", "note"], rows, "importances")]
    _with_figure(parts, importance_figure, data)
    return _section(title, parts)


def saturation_section(data: ReportData) -> Section:
    if not data.saturation:
        missing = "No trial measured two or more levels: saturation cannot be judged."
        return _section("Saturation", [missing_note(missing)])
    headers = ["trial", "role", "saturates at", "tok/s there", "limiter", "explanation"]
    rows = [
        [r.trial_number, r.role, r.concurrency, r.output_throughput, r.limiter, r.explanation]
        for r in data.saturation
    ]
    return _section("Saturation", [table(headers, rows, "saturation")])


def acceptance_section(data: ReportData) -> Section:
    title = "Speculative decoding acceptance"
    if not data.acceptance:
        return _section(
            title, [missing_note("No speculative-decoding acceptance was measured in this study.")]
        )
    headers = ["trial", "role", "method", "k", "concurrency", "acceptance rate", "mean acceptance length"]
    rows = [
        [
            r.trial_number,
            r.role,
            r.method,
            r.num_speculative_tokens,
            r.concurrency,
            r.acceptance_rate,
            r.mean_acceptance_length,
        ]
        for r in data.acceptance
    ]
    parts = [table(headers, rows, "acceptance")]
    _with_figure(parts, acceptance_figure, data)
    return _section(title, parts)


def trials_section(data: ReportData) -> Section:
    names = [o.name for o in data.objectives]
    rows = []
    for t in data.trials:
        vals = list(t.values) if t.values is not None else [None] * len(names)
        per_gpu = [t.gpus, t.peak_tok_s, t.peak_tok_s_per_gpu]
        rows.append([t.number, t.state, t.role, t.feasible, *vals, *per_gpu, t.config, t.reason])
    headers = ["trial", "state", "role", "feasible", *names, *PER_GPU_HEADERS, "configuration", "reason"]
    return _section("All trials", [table(headers, rows, "trials")])


#: the report's sections, in order, each built from the data alone (None: a section this study has not)
SECTIONS: tuple[Callable[[ReportData], Section | None], ...] = (
    deploy_section,
    summary_section,
    trace_section,
    throughput_section,
    verdict_section,
    capacity_section,
    latency_section,
    cost_section,
    gpu_time_section,
    pareto_section,
    user_gpu_section,
    hypervolume_section,
    importance_section,
    saturation_section,
    acceptance_section,
    trials_section,
)
