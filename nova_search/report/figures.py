"""Plotly figure builders shared by the HTML report (``report.html``) and the dashboard
(``report.dashboard``): series of numbers per concurrency in, a figure out.

Nothing here reads storage or chooses which trials to show; the callers build the ``Series`` from
their data records. The x axis is the concurrency as a category (levels are few and uneven: 1, 8, 64).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import plotly.graph_objects as go
from plotly.subplots import make_subplots

if TYPE_CHECKING:
    from nova_search.report.data import AcceptanceRow

#: plotly's default qualitative colours, for series that name none (stable across panels)
PALETTE = ("#636efa", "#ef553b", "#00cc96", "#ab63fa", "#ffa15a", "#19d3f3", "#ff6692", "#b6e880")
STOCK_COLOR = PALETTE[0]
TUNED_COLOR = PALETTE[1]


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
    series: Sequence[Series], *, title: str, yaxis_title: str, xaxis_title: str = "concurrency"
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
    in every panel and appears once in the legend (clicking it hides it everywhere)."""
    every = [s for _, group in panels for s in group if not s.empty]
    colors = _colors(every)
    fig = make_subplots(rows=1, cols=max(len(panels), 1), subplot_titles=[t for t, _ in panels])
    seen: set[str] = set()
    for col, (_, group) in enumerate(panels, start=1):
        for s in group:
            if s.empty:
                continue
            fig.add_trace(_trace(s, colors[s.name], showlegend=s.name not in seen), row=1, col=col)
            seen.add(s.name)
    fig.update_layout(title=title)
    fig.update_xaxes(type="category", title_text="concurrency")
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
