"""The report's figures, each drawn from ``ReportData`` alone (None when there is nothing to draw):
throughput and latency per concurrency (stock vs tuned), the objectives and the Pareto front, the
hypervolume history, parameter importances, draft acceptance, a trace's histograms. The plotly
builders they share with the dashboard are ``report.figures``.
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from nova_search.report.data import LATENCY_METRICS, ReportData
from nova_search.report.figures import (
    STOCK_COLOR,
    TUNED_COLOR,
    Series,
    acceptance_series,
    line_figure,
    metric_axis_title,
    panel_figure,
)


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


def trace_figure(data: ReportData) -> go.Figure | None:
    """A trace workload's arrivals over time and its prompt and output length histograms."""
    t = data.trace
    if not t:
        return None
    arrivals, panels = t["arrivals"], ("input_len", "output_len")
    fig = make_subplots(
        rows=1,
        cols=3,
        subplot_titles=("requests per second over the trace", "prompt tokens", "output tokens"),
    )
    width = arrivals["bin_s"]
    xs = [(k + 0.5) * width for k in range(len(arrivals["counts"]))]
    fig.add_trace(go.Bar(x=xs, y=[c / width for c in arrivals["counts"]], name="arrivals"), row=1, col=1)
    fig.update_xaxes(title_text="seconds into the trace", row=1, col=1)
    for col, name in enumerate(panels, start=2):
        h = t[name]
        mids = [(a + b) / 2 for a, b in zip(h["edges"], h["edges"][1:], strict=False)]
        fig.add_trace(go.Bar(x=mids, y=h["counts"], name=name), row=1, col=col)
        fig.update_xaxes(title_text="tokens", row=1, col=col)
        fig.update_yaxes(title_text="requests", row=1, col=col)
    title = f"The trace: {t['requests']} requests over {t['duration_s']:.0f} s"
    fig.update_layout(title=title, showlegend=False)
    return fig
