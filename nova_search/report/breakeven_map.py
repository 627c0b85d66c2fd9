"""The break-even map drawn: a markdown table (per drafter and level: the break-even acceptance length,
the gain with its interval at each length measured) and a plotly figure (acceptance length against
concurrency; the region where the drafter pays shaded, a measured acceptance placed on it). Every
figure is a projection at the acceptance lengths measured (``analysis.breakeven``)."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from nova_search.analysis.breakeven import BreakEven
from nova_search.report.markdown import table as md_table

PROJECTED = (
    "Projected at synthetic acceptance lengths (vLLM's synthetic rejection sampler): the drafter's cost "
    "is measured, its acceptance is chosen; a gain here is what the drafter would give at that "
    "acceptance, not what it gives."
)


def _gain(g: tuple[float, float | None, float | None, float | None, str]) -> str:
    length, diff, lo, hi, verdict = g
    if diff is None:
        return f"L={length:g}: –"
    ci = f" [{lo:+.1f}, {hi:+.1f}]" if lo is not None and hi is not None else ""
    mark = {"verified_gain": " ✓", "verified_loss": " ✗"}.get(verdict, "")
    return f"L={length:g}: {diff:+.1f} %{ci}{mark}"


HEADERS = ["drafter", "k", "concurrency", "break-even L", "gain vs tuned at each L (95 % interval)"]


def table_rows(points: Sequence[BreakEven]) -> list[list[str]]:
    return [
        [
            p.method,
            str(p.k),
            str(p.concurrency),
            p.text() + ("" if p.monotone else " (not monotone)"),
            "; ".join(_gain(g) for g in p.gains),
        ]
        for p in points
    ]


def breakeven_markdown(
    points: Sequence[BreakEven],
    measured: Sequence[tuple[str, int, float]] = (),
    schedule: Sequence[tuple[int, int, int]] | None = None,
    schedule_length: float | None = None,
) -> str:
    """The map as markdown. ``measured``: (method, k, L) read from a real drafter's /metrics."""
    parts = [
        "## Break-even map (projected)",
        "",
        PROJECTED,
        "",
        md_table(HEADERS, table_rows(points), text=HEADERS[:1]),
        "",
    ]
    for method, k, length in measured:
        where = [
            p.concurrency
            for p in points
            if p.method == method and p.k == k and p.length and length >= p.length
        ]
        verdict = (
            f"pays at concurrency {', '.join(map(str, where))}"
            if where
            else "below the break-even at every level measured"
        )
        parts.append(f"- measured acceptance of {method} k={k}: L={length:.2f} (vLLM /metrics): {verdict}")
    if schedule:
        at = f" at L={schedule_length:g}" if schedule_length is not None else ""
        parts.append(
            f"- best k by concurrency{at} (projected), as vLLM's `num_speculative_tokens_per_batch_size`: "
            f"`{[list(x) for x in schedule]}`"
        )
    return "\n".join(parts).rstrip() + "\n"


def breakeven_figure(
    points: Sequence[BreakEven], measured: Sequence[tuple[str, int, float]] = (), *, title: str | None = None
) -> go.Figure:
    """Acceptance length (y) against concurrency (x, log): per drafter, the break-even line and the
    region above it, where the drafter pays, shaded; the lengths measured as points (✓ verified gain);
    a measured acceptance as a horizontal line."""
    fig = go.Figure()
    drafters = sorted({(p.method, p.k) for p in points})
    for method, k in drafters:
        mine = sorted((p for p in points if p.method == method and p.k == k), key=lambda p: p.concurrency)
        name = f"{method} k={k}"
        top = float(k + 1)
        xs = [p.concurrency for p in mine]
        ys = [p.length if p.length is not None else top for p in mine]
        fig.add_trace(go.Scatter(x=xs, y=[top] * len(xs), mode="lines", line={"width": 0}, showlegend=False))
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="lines+markers",
                name=f"{name}: break-even (pays above)",
                fill="tonexty",
                opacity=0.5,
            )
        )
        pts = [(p.concurrency, g) for p in mine for g in p.gains]
        fig.add_trace(
            go.Scatter(
                x=[c for c, _ in pts],
                y=[g[0] for _, g in pts],
                mode="markers",
                name=f"{name}: lengths measured",
                marker={"symbol": ["circle" if g[4] == "verified_gain" else "x" for _, g in pts], "size": 8},
                text=[_gain(g) for _, g in pts],
                hoverinfo="text",
            )
        )
    for method, k, length in measured:
        fig.add_hline(y=length, line_dash="dash", annotation_text=f"measured {method} k={k}: L={length:.2f}")
    fig.update_layout(
        title=title or "Break-even acceptance length by concurrency (projected)",
        xaxis={"title": "concurrency", "type": "log"},
        yaxis={"title": "mean acceptance length L"},
    )
    return fig
