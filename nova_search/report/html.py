"""The report as one self-contained HTML file: plotly figures drawn from ``report.data`` records,
the same data as HTML tables, and plain sentences wherever data is missing.

Each section is a small function from ``ReportData`` to a ``Section`` of typed parts (a paragraph, a
note on what is missing, a table, a figure, a command); the HTML is the Jinja2 templates in
``report/templates`` (autoescaping on: every text is escaped, only plotly's own figure markup is
trusted). The report opens with "What to deploy", the deploy answer (``results.deploy``) that
``policy``, ``status``, the study note and ``export`` give too.

plotly.js is inlined once (in ``<head>``), every figure is a ``plotly.io.to_html(full_html=False,
include_plotlyjs=False)`` div, so the file opens offline. ``write_report`` writes atomically (a
temporary file in the same folder, then ``os.replace``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

import jinja2
import plotly.graph_objects as go
import plotly.io as pio
from markupsafe import Markup
from plotly.offline import get_plotlyjs

from nova_search.files import write_atomic
from nova_search.report.data import LATENCY_METRICS, ReportData
from nova_search.report.figures import (
    STOCK_COLOR,
    TUNED_COLOR,
    Series,
    acceptance_series,
    line_figure,
    metric_axis_title,
    panel_figure,
    user_gpu_figure,
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
    policy_rows,
    projection_lines,
    tradeoff_rows,
)

#: the trial table's columns for the GPUs a server held and its output throughput per server and per GPU
PER_GPU_HEADERS = ("GPUs", "peak out tok/s", "peak out tok/s per GPU")

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
h1 { font-size: 1.6em; } h2 { margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th { background: #f3f3f3; } td.text { text-align: left; }
pre { background: #f6f6f6; padding: 0.5em 0.8em; white-space: pre-wrap; word-break: break-all; }
p.missing { color: #8a4b00; background: #fff6e5; padding: 0.4em 0.8em; border-left: 3px solid #e0a030; }
"""


def _fmt(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, tuple | list):
        return ", ".join(_fmt(x) for x in v)
    return str(v)


# ---------------------------------------------------------------- a section's parts (drawn by the templates)


@dataclass(frozen=True)
class Part:
    #: which template macro draws it: p, missing, table, figure, h3, code, pre
    kind: str
    text: str = ""
    #: a table's header cells and rows of (text, is_text) cells, and its CSS class
    headers: tuple[str, ...] = ()
    rows: tuple[tuple[tuple[str, bool], ...], ...] = ()
    cls: str = ""
    #: a figure's plotly div (trusted: plotly's own markup)
    html: Markup = Markup("")
    #: a paragraph with inline code: text, then code, then after
    code: str = ""
    after: str = ""


@dataclass(frozen=True)
class Section:
    title: str
    parts: tuple[Part, ...]
    #: the section element's id, where a reader (or a test) looks for it
    id: str = ""


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], cls: str = "") -> Part:
    """A table part; numbers to 4 significant digits, None as a dash, text cells left-aligned."""
    cells = tuple(tuple((_fmt(v), isinstance(v, str)) for v in row) for row in rows)
    return Part("table", headers=tuple(headers), rows=cells, cls=cls)


def _p(text: str) -> Part:
    return Part("p", text=text)


def _missing(text: str) -> Part:
    return Part("missing", text=text)


def _div(fig: go.Figure) -> Part:
    fig.update_layout(template="plotly_white", margin={"l": 60, "r": 20, "t": 50, "b": 50})
    html = pio.to_html(fig, full_html=False, include_plotlyjs=False, config={"displaylogo": False})
    return Part("figure", html=Markup(html))  # noqa: S704 - plotly's own markup, no study text in it unescaped


# ---------------------------------------------------------------- figures (from data only)


def throughput_figure(data: ReportData) -> go.Figure | None:
    if not data.throughput:
        return None
    xs = tuple(r.concurrency for r in data.throughput)
    rows = data.throughput
    series = (
        Series(f"stock (trial {data.stock_trial})", xs, tuple(r.stock_tok_s for r in rows), STOCK_COLOR),
        Series(f"tuned (trial {data.tuned_trial})", xs, tuple(r.tuned_tok_s for r in rows), TUNED_COLOR),
    )
    return line_figure(
        series, title="Output throughput per concurrency", yaxis_title="output tok/s (per server)"
    )


def latency_figure(data: ReportData) -> go.Figure | None:
    if not data.latency:
        return None
    panels = []
    for m in LATENCY_METRICS:
        group = []
        for which, color in (("stock", STOCK_COLOR), ("tuned", TUNED_COLOR)):
            rows = [r for r in data.latency if r.which == which]
            if rows:
                group.append(
                    Series(
                        f"{which} (trial {rows[0].trial_number})",
                        tuple(r.concurrency for r in rows),
                        tuple(getattr(r, f"{m}_p99_ms") for r in rows),
                        color,
                    )
                )
        panels.append((f"{m.upper()} p99 (ms)", group))
    return panel_figure(panels, title="Latency p99 per concurrency")


def pareto_figure(data: ReportData) -> go.Figure | None:
    if not data.pareto or not data.objectives:
        return None
    objs = data.objectives
    fig = go.Figure()
    groups = (
        ("Pareto front", [p for p in data.pareto if p.on_front], "#ef553b"),
        ("feasible", [p for p in data.pareto if p.feasible and not p.on_front], "#636efa"),
        ("infeasible", [p for p in data.pareto if not p.feasible], "#bbbbbb"),
    )
    for name, pts, color in groups:
        if not pts:
            continue
        if len(objs) >= 2:
            x, y = [p.values[0] for p in pts], [p.values[1] for p in pts]
        else:
            x, y = [p.trial_number for p in pts], [p.values[0] for p in pts]
        fig.add_trace(
            go.Scatter(
                x=x,
                y=y,
                mode="markers",
                name=name,
                marker={"size": 11, "color": color},
                text=[f"trial {p.trial_number} ({p.role})" for p in pts],
                hovertemplate="%{text}<br>%{x:.4g}, %{y:.4g}<extra></extra>",
            )
        )
    if len(objs) >= 2:
        fig.update_layout(
            title="Objectives and the Pareto front",
            xaxis_title=metric_axis_title(objs[0]),
            yaxis_title=metric_axis_title(objs[1]),
        )
    else:
        fig.update_layout(
            title=f"{objs[0].name} per trial", xaxis_title="trial", yaxis_title=metric_axis_title(objs[0])
        )
    return fig


def hypervolume_figure(data: ReportData) -> go.Figure | None:
    if not data.hypervolume:
        return None
    fig = go.Figure(
        go.Scatter(
            x=list(range(1, len(data.hypervolume) + 1)),
            y=[p.hypervolume for p in data.hypervolume],
            mode="lines+markers",
            text=[f"after trial {p.trial_number}" for p in data.hypervolume],
            hovertemplate="%{text}: %{y:.4g}<extra></extra>",
            name="hypervolume",
        )
    )
    fig.update_layout(
        title="Hypervolume history", xaxis_title="feasible COMPLETE trials so far", yaxis_title="hypervolume"
    )
    return fig


def importance_figure(data: ReportData) -> go.Figure | None:
    shown = [imp for imp in data.importances if imp.importances]
    if not shown:
        return None
    fig = go.Figure()
    for imp in shown:
        fig.add_trace(
            go.Bar(x=[k for k, _ in imp.importances], y=[v for _, v in imp.importances], name=imp.objective)
        )
    fig.update_layout(title="Parameter importances", barmode="group", yaxis_title="importance")
    return fig


def acceptance_figure(data: ReportData) -> go.Figure | None:
    series = acceptance_series(data.acceptance)
    if not series:
        return None
    return line_figure(
        series, title="Draft acceptance rate", yaxis_title="acceptance rate (accepted ÷ drafted tokens)"
    )


# ---------------------------------------------------------------- sections


def _section(title: str, parts: list[Part], id: str = "") -> Section:
    return Section(title, tuple(parts), id)


def _with_figure(parts: list[Part], make: Callable[[ReportData], go.Figure | None], data: ReportData) -> None:
    fig = make(data)
    if fig is not None:
        parts.append(_div(fig))


@cache
def _templates() -> jinja2.Environment:
    """The report's templates, shipped in the package (package data), autoescaping always on."""
    return jinja2.Environment(
        loader=jinja2.PackageLoader("nova_search.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def render_html(data: ReportData, *, generated: datetime | None = None) -> str:
    """The whole report as one HTML document (plotly.js inlined once)."""
    generated = generated or datetime.now()
    return (
        _templates()
        .get_template("report.html.j2")
        .render(
            title=f"nova-search report: {data.study_name}",
            stamp=generated.strftime("%Y-%m-%d %H:%M:%S"),
            storage=data.storage,
            css=Markup(_CSS),
            plotlyjs=Markup(get_plotlyjs()),  # noqa: S704 - plotly's own library
            sections=[section(data) for section in SECTIONS],
        )
    )


def deploy_section(data: ReportData) -> Section:
    """What to deploy: the deploy answer, as ``policy`` prints it."""
    title = "What to deploy"
    a = data.deploy
    if a is None:
        return _section(title, [_missing("No deploy answer: the study has no objectives.")], "deploy")
    parts = [_p(answer_heading(a) + ".")]
    if not a.ranges:
        return _section(title, [*parts, _missing(f"Nothing to deploy yet: {a.reason}")], "deploy")
    parts.append(table(ANSWER_HEADERS, answer_rows(a), "deploy"))
    for r in a.ranges:
        parts += [
            _p(f"{r.label} ({deploy_what(r)}, trial {r.configuration.trial}):"),
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
    for what, command in export_commands(a):
        parts += [_p(f"{what}:"), Part("pre", text=command)]
    if a.export_needs:
        parts.append(_missing(f"Before deploying: {a.export_needs}"))
    return _section(title, parts, "deploy")


def summary_section(data: ReportData) -> Section:
    objs = ", ".join(f"{o.name} ({o.direction})" for o in data.objectives) or "none"
    rows = [[data.study_name, data.storage, objs, data.stock_trial, data.tuned_trial]]
    parts = [table(["study", "storage", "objectives", "stock trial", "tuned trial"], rows, "summary")]
    parts += [_missing(n) for n in data.notes]
    return _section("Summary", parts)


def throughput_section(data: ReportData) -> Section:
    title = "Stock vs tuned: output throughput"
    if not data.throughput:
        return _section(title, [_missing("No stock baseline and no tuned trial measured any level.")])
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
        return _section(title, [_missing(missing)])
    projected = [d.projected for d in v.drafters if d.projected]
    parts = [_p(line) for line in [*projection_lines(projected), *header_lines(v)]]
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
    parts += [_missing(n) for n in v.notes]
    return _section(title, parts)


def latency_section(data: ReportData) -> Section:
    if not data.latency:
        return _section(
            "Latency",
            [_missing("No latency to compare: neither a stock nor a tuned trial measured a level.")],
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
        return _section(title, [_missing(missing)])
    headers = ["concurrency", "which", "trial", "GPUs", "tok/s", "$ per 1M output tokens"]
    rows = [[r.concurrency, r.which, r.trial_number, r.gpus, r.tok_s, r.usd_per_1m_tokens] for r in data.cost]
    return _section(
        title,
        [
            _p(f"At ${data.gpu_hour_usd:g} per GPU-hour: price x GPUs / (tok/s x 3600) x 1e6."),
            table(headers, rows, "cost"),
        ],
    )


#: how the search-cost table names where the GPU time went
GPU_TIME_PLACES = {"windows": "inside measurement windows", "boot": "booting", "failed_boot": "failed boots"}


def gpu_time_section(data: ReportData) -> Section:
    g = data.gpu_time
    parts = [_p(g.text())]
    held = g.held_text()
    if held is not None:
        parts.append(_p(held))
    if g.total > 0:
        rows = [
            [GPU_TIME_PLACES.get(p, "other"), round(s, 1), f"{g.share(p):.0%}"]
            for p, s in g.seconds().items()
        ]
        parts.append(table(["where", f"{g.unit}-seconds", "share"], rows, "gpu-time"))
    return _section(f"Search cost: where the {g.label} went", parts)


def pareto_section(data: ReportData) -> Section:
    if not data.pareto:
        return _section("Pareto front", [_missing("No COMPLETE trial: no objective values to show.")])
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
        return _section(title, [_missing("No COMPLETE trial measured a level: no point to draw.")])
    return _section(title, [_div(fig)])


def hypervolume_section(data: ReportData) -> Section:
    title = "Hypervolume history"
    if not data.hypervolume:
        return _section(title, [_missing("No feasible COMPLETE trial: no hypervolume history.")])
    ref = ", ".join(
        f"{o.name}={v:.4g}" for o, v in zip(data.objectives, data.hypervolume_reference or (), strict=False)
    )
    rows = [[p.trial_number, p.hypervolume] for p in data.hypervolume]
    parts = [
        _p(f"Reference point (each objective's worst feasible value, 10 % of its range further): {ref}."),
        table(["after trial", "hypervolume"], rows, "hypervolume"),
    ]
    _with_figure(parts, hypervolume_figure, data)
    return _section(title, parts)


def importance_section(data: ReportData) -> Section:
    title = "Parameter importances"
    if not data.importances:
        missing = "Parameter importances need at least 2 COMPLETE trials with searched parameters."
        return _section(title, [_missing(missing)])
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
        return _section("Saturation", [_missing(missing)])
    headers = ["trial", "role", "saturates at", "tok/s there", "limiter", "explanation"]
    rows = [
        [r.trial_number, r.role, r.concurrency, r.output_throughput, r.limiter, r.explanation]
        for r in data.saturation
    ]
    return _section("Saturation", [table(headers, rows, "saturation")])


def acceptance_section(data: ReportData) -> Section:
    title = "Speculative decoding acceptance"
    if not data.acceptance:
        return _section(title, [_missing("No speculative-decoding acceptance was measured in this study.")])
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


#: the report's sections, in order, each built from the data alone
SECTIONS: tuple[Callable[[ReportData], Section], ...] = (
    deploy_section,
    summary_section,
    throughput_section,
    verdict_section,
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


def write_report(data: ReportData, path: str | os.PathLike[str]) -> Path:
    """Render and write atomically (a crash never leaves a half-written report)."""
    return write_atomic(path, render_html(data))
