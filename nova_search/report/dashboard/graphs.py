"""The plotly graphs on optuna-dashboard's study page, from ``results`` records (pure).

``dashboard_figures(results)``: graph id -> plotly figure: output throughput and latency (TTFT and
TPOT p99) against concurrency for stock, the tuned baseline and its runners-up; speculative
acceptance when a drafter was measured; output tok/s per user against per GPU for every trial and
level, the front marked. Drawn with ``report.figures``, as the report; every axis titled with its
unit. The graph ids are stable, so each refresh overwrites its graph.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nova_search.report.data import acceptance_table, trial_curves, user_gpu_points
from nova_search.report.figures import Series, acceptance_series, line_figure, panel_figure, user_gpu_figure
from nova_search.results.select import ranked
from nova_search.results.trials import StudyResults, TrialResult

if TYPE_CHECKING:
    import plotly.graph_objects as go

#: graph ids on the study page (stable, so each refresh overwrites its graph)
GRAPH_THROUGHPUT = "nova-throughput"
GRAPH_LATENCY = "nova-latency"
GRAPH_ACCEPTANCE = "nova-acceptance"
GRAPH_USER_GPU = "nova-user-gpu"
#: runner-up non-speculative trials drawn after the tuned baseline
CANDIDATES = 3
#: speculative trials drawn in the acceptance graph (the best ones by the first objective)
ACCEPTANCE_TRIALS = 5


def _curve_series(results: StudyResults, metric: str) -> list[Series]:
    from nova_search.report.figures import STOCK_COLOR, TUNED_COLOR

    colors = {"stock": STOCK_COLOR, "tuned": TUNED_COLOR}
    out = []
    for c in trial_curves(results, candidates=CANDIDATES):
        x, y = c.points(metric)
        out.append(Series(c.label, x, y, colors.get(c.kind)))
    return out


def dashboard_figures(results: StudyResults) -> dict[str, go.Figure]:
    """Graph id -> figure, only for graphs with something to draw."""
    figures: dict[str, go.Figure] = {}
    throughput = _curve_series(results, "output_throughput")
    if any(not s.empty for s in throughput):
        figures[GRAPH_THROUGHPUT] = line_figure(
            throughput,
            title="Output throughput vs concurrency: stock, tuned, runners-up",
            yaxis_title="output tok/s (per server)",
        )
        figures[GRAPH_LATENCY] = panel_figure(
            [
                ("TTFT p99 (ms)", _curve_series(results, "ttft_p99_ms")),
                ("TPOT p99 (ms)", _curve_series(results, "tpot_p99_ms")),
            ],
            title="Latency p99 vs concurrency",
        )
    rows = acceptance_table(results)
    if rows:
        order = {t.key: i for i, t in enumerate(_by_first_objective(results))}
        chosen = sorted({r.trial_number for r in rows}, key=lambda k: (order.get(k, len(order)), k))
        keep = set(chosen[:ACCEPTANCE_TRIALS])
        series = acceptance_series([r for r in rows if r.trial_number in keep])
        if series:
            figures[GRAPH_ACCEPTANCE] = line_figure(
                series,
                title="Speculative decoding: draft acceptance rate",
                yaxis_title="acceptance rate (accepted ÷ drafted tokens)",
            )
    user_gpu = user_gpu_figure(user_gpu_points(results))
    if user_gpu is not None:
        figures[GRAPH_USER_GPU] = user_gpu
    return figures


def _by_first_objective(results: StudyResults) -> list[TrialResult]:
    """COMPLETE trials, best first by the first objective, feasible ones before infeasible ones."""
    if not results.objectives:
        return results.complete()
    first = results.objectives[0]
    feasible = ranked(results.feasible(), first)
    return feasible + ranked([t for t in results.complete() if not t.feasible], first)
