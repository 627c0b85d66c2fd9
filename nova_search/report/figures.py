"""Plotly figure builders shared by the HTML report (``report.html``) and the dashboard
(``report.dashboard.graphs``): series of numbers per concurrency in, a figure out.

Nothing here reads storage or chooses which trials to show; the callers build the ``Series`` from
their data records. The x axis is the concurrency as a category (levels are few and uneven: 1, 8, 64).
Every axis has a title with its unit (``metric_axis_title`` for a metric named in a spec).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import plotly.graph_objects as go
from plotly.subplots import make_subplots

if TYPE_CHECKING:
    from nova_search.measure.objectives import Objective
    from nova_search.report.data import AcceptanceRow, UserGpuPoint

#: plotly's default qualitative colours, for series that name none (stable across panels)
PALETTE = ("#636efa", "#ef553b", "#00cc96", "#ab63fa", "#ffa15a", "#19d3f3", "#ff6692", "#b6e880")
STOCK_COLOR = PALETTE[0]
TUNED_COLOR = PALETTE[1]
#: the concurrency axis (the load generator's requests in flight)
CONCURRENCY_TITLE = "concurrency (requests in flight)"
USER_TITLE = "output tok/s per user (÷ concurrency)"
GPU_TITLE = "output tok/s per GPU (÷ GPUs per server)"


def metric_unit(metric: str) -> str:
    """The unit of a metric of ``measure.metrics.LevelResult`` ("" for a ratio or a count)."""
    if metric.endswith("_ms"):
        return "ms"
    if metric in ("output_throughput", "total_token_throughput"):
        return "tok/s"
    if metric in ("request_throughput", "goodput"):
        return "req/s"
    if metric.endswith("_s"):
        return "s"
    return ""


def metric_axis_title(objective: Objective) -> str:
    """An objective's axis title: its name and unit, e.g. ``ttft_p99_ms@4 (ms)``."""
    unit = metric_unit(objective.metric)
    return f"{objective.name} ({unit})" if unit else objective.name


@dataclass(frozen=True)
class Series:
    """One line: a value per concurrency level (None where the level was not measured)."""

    name: str
    x: tuple[int, ...]
    y: tuple[float | None, ...]
    color: str | None = None

    @property
    def empty(self) -> bool:
        return all(v is None for v in self.y)


def _colors(series: Sequence[Series]) -> dict[str, str]:
    """A colour per series name: its own, else the palette's next one not taken."""
    taken = {s.color for s in series if s.color}
    free = [c for c in PALETTE if c not in taken] or list(PALETTE)
    out: dict[str, str] = {}
    n = 0
    for s in series:
        if s.name in out:
            continue
        if s.color:
            out[s.name] = s.color
        else:
            out[s.name] = free[n % len(free)]
            n += 1
    return out


def _trace(s: Series, color: str, *, showlegend: bool = True) -> go.Scatter:
    return go.Scatter(
        x=[str(c) for c in s.x],
        y=list(s.y),
        mode="lines+markers",
        name=s.name,
        legendgroup=s.name,
        showlegend=showlegend,
        line={"color": color},
        hovertemplate=f"{s.name}<br>concurrency %{{x}}: %{{y:.4g}}<extra></extra>",
    )


def line_figure(
    series: Sequence[Series], *, title: str, yaxis_title: str, xaxis_title: str = CONCURRENCY_TITLE
) -> go.Figure:
    """One panel, one line per series (series with no value at all are left out)."""
    shown = [s for s in series if not s.empty]
    colors = _colors(shown)
    fig = go.Figure([_trace(s, colors[s.name]) for s in shown])
    fig.update_layout(title=title, xaxis_title=xaxis_title, yaxis_title=yaxis_title)
    fig.update_xaxes(type="category")
    return fig


def panel_figure(panels: Sequence[tuple[str, Sequence[Series]]], *, title: str) -> go.Figure:
    """Side-by-side panels (``(panel title, series)``), sharing one legend: a series keeps its colour
    in every panel and appears once in the legend (clicking it hides it everywhere). A panel's title,
    unit included ("TTFT p99 (ms)"), is its y axis title too."""
    every = [s for _, group in panels for s in group if not s.empty]
    colors = _colors(every)
    fig = make_subplots(rows=1, cols=max(len(panels), 1), subplot_titles=[t for t, _ in panels])
    seen: set[str] = set()
    for col, (panel_title, group) in enumerate(panels, start=1):
        fig.update_yaxes(title_text=panel_title, row=1, col=col)
        for s in group:
            if s.empty:
                continue
            fig.add_trace(_trace(s, colors[s.name], showlegend=s.name not in seen), row=1, col=col)
            seen.add(s.name)
    fig.update_layout(title=title)
    fig.update_xaxes(type="category", title_text=CONCURRENCY_TITLE)
    return fig


def acceptance_series(rows: Sequence[AcceptanceRow]) -> list[Series]:
    """Draft acceptance rate per level, one series per speculative trial (rows without a rate are
    left out), in trial-number order."""
    rows = [r for r in rows if r.acceptance_rate is not None]
    out = []
    for n in sorted({r.trial_number for r in rows}):
        mine = [r for r in rows if r.trial_number == n]
        label = f"trial {n} ({mine[0].method or '?'}/k{mine[0].num_speculative_tokens or '?'})"
        out.append(Series(label, tuple(r.concurrency for r in mine), tuple(r.acceptance_rate for r in mine)))
    return out


def user_gpu_figure(points: Sequence[UserGpuPoint], *, title: str | None = None) -> go.Figure | None:
    """Output tok/s per user (x) against output tok/s per GPU (y), one marker per configuration and
    concurrency level, the front drawn as a line (``vllm bench sweep plot_pareto``'s view). Infeasible
    trials' points are grey crosses. None without a point."""
    if not points:
        return None
    groups = (
        ("feasible", [p for p in points if p.feasible and not p.on_front], {"color": STOCK_COLOR, "size": 9}),
        ("infeasible (a constraint fails)", [p for p in points if not p.feasible],
         {"color": "#aaaaaa", "size": 9, "symbol": "x"}),
    )  # fmt: skip
    fig = go.Figure()
    front = sorted((p for p in points if p.on_front), key=lambda p: (p.tok_s_per_user, -p.tok_s_per_gpu))
    for name, pts, marker in (*groups, ("Pareto front", front, {"color": TUNED_COLOR, "size": 11})):
        if not pts:
            continue
        fig.add_trace(
            go.Scatter(
                x=[p.tok_s_per_user for p in pts],
                y=[p.tok_s_per_gpu for p in pts],
                mode="lines+markers" if name == "Pareto front" else "markers",
                name=name,
                marker=marker,
                text=[
                    f"trial {p.trial_number} ({p.configuration or '?'}) at concurrency {p.concurrency}, "
                    f"{p.gpus} GPU{'s' if p.gpus != 1 else ''}"
                    for p in pts
                ],
                hovertemplate="%{text}<br>%{x:.4g} tok/s per user, %{y:.4g} tok/s per GPU<extra></extra>",
            )
        )
    fig.update_layout(
        title=title or "Output tok/s per user vs per GPU (trial × concurrency)",
        xaxis_title=USER_TITLE,
        yaxis_title=GPU_TITLE,
    )
    return fig
