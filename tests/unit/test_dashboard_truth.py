"""What the dashboard and the report must not hide (issue 38, item 5): Optuna 5's constraints in
optuna-dashboard 0.21's API and in the worker's view of a trial, and the tok/s per user vs per GPU
points with their front (pure, hand-made trials)."""

from __future__ import annotations

import optuna
import pytest

from nova_search.knobs import EngineConfig
from nova_search.report.dashboard.notes import trial_note_markdown
from nova_search.report.dashboard.serve import show_named_constraints
from nova_search.report.data import user_gpu_points
from nova_search.report.figures import user_gpu_figure
from nova_search.worker.tell import trial_end
from tests.support.builders import level as lv
from tests.support.builders import report_study as study
from tests.support.builders import report_trial as mk


def _infeasible_study() -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    s = optuna.create_study(directions=["maximize"])
    for violation in (120.0, -5.0):
        t = s.ask()
        t.set_constraint("ttft_p99_ms<=500@4", violation)  # what trial/run.py writes
        s.tell(t, 1.0)
    return s


def test_the_dashboard_api_shows_optuna5_constraints():
    from optuna_dashboard import _serializer

    s = _infeasible_study()
    assert show_named_constraints() and show_named_constraints()  # idempotent
    got = [_serializer.serialize_frozen_trial(s._study_id, t, {})["constraints"] for t in s.trials]
    assert got == [[120.0], [-5.0]]
    assert [t.constraints for t in s.trials] == [{"ttft_p99_ms<=500@4": 120.0}, {"ttft_p99_ms<=500@4": -5.0}]


def test_the_worker_sees_an_infeasible_trial():
    infeasible, feasible = _infeasible_study().trials
    assert trial_end(infeasible).feasible is False and trial_end(feasible).feasible is True


def test_the_trial_note_names_each_constraint():
    t = mk(1, [lv(4, 100)], constraints={"ttft_p99_ms<=500@4": 12.5, "errors<=0@every": 0.0})
    note = trial_note_markdown(t)
    assert "### Constraints: INFEASIBLE (1 broken)" in note
    assert "| ttft_p99_ms<=500@4 | 12.5 | **no** |" in note and "| errors<=0@every | 0 | yes |" in note


def test_user_gpu_points_and_front():
    two_gpus = EngineConfig(tensor_parallel_size=2)
    results = study(
        mk(0, [lv(1, 50), lv(8, 240)], role="stock"),
        mk(1, [lv(1, 60), lv(8, 200)], config=two_gpus),  # 2 GPUs: per GPU halved
        mk(2, [lv(1, 90), lv(8, 400)], constraints={"c": 1.0}),  # best, but infeasible
    )
    points = {(p.trial_number, p.concurrency): p for p in user_gpu_points(results)}
    assert set(points) == {(k, c) for k in ("0", "1", "2") for c in (1, 8)}
    p = points[("1", 8)]
    assert (p.gpus, p.tok_s_per_user, p.tok_s_per_gpu) == (2, pytest.approx(25.0), pytest.approx(100.0))
    # feasible points: (50, 50) (30, 240) for trial 0; (60, 30) (25, 100) for trial 1
    assert {k for k, p in points.items() if p.on_front} == {("0", 1), ("0", 8), ("1", 1)}
    assert not any(p.on_front for k, p in points.items() if k[0] == "2")
    fig = user_gpu_figure(list(points.values()))
    assert fig is not None and fig.layout.xaxis.title.text.startswith("output tok/s per user")
    assert [t.name for t in fig.data] == ["feasible", "infeasible (a constraint fails)", "Pareto front"]
    assert user_gpu_figure([]) is None


def test_a_contour_without_a_grid_is_dropped_and_the_markers_stay(monkeypatch):
    """Optuna's plot_contour on the stock trial (no parameters) and one other: a contour trace with
    z None, which plotly.js throws on (the blank Analytics page); keep_analytics_drawable drops it."""
    from nova_search.report.dashboard.serve import keep_analytics_drawable

    cat = optuna.distributions.CategoricalDistribution((True, False))
    study = optuna.create_study(directions=["maximize", "minimize"])
    study.add_trial(optuna.trial.create_trial(params={}, distributions={}, values=[58.9, 239.5]))
    study.add_trial(
        optuna.trial.create_trial(
            params={"a": True, "b": True}, distributions={"a": cat, "b": cat}, values=[378.7, 183.4]
        )
    )
    import optuna.visualization as vis

    def target(t):
        return t.values[0]

    before = [(t.type, t.z) for t in vis.plot_contour(study, target=target).data if t.type == "contour"]
    assert before == [("contour", None)]  # what optuna-dashboard 0.21 hands to plotly.js today
    monkeypatch.setattr(vis, "plot_contour", vis.plot_contour)  # the wrapper goes with the test
    assert keep_analytics_drawable() and keep_analytics_drawable()  # idempotent
    after = vis.plot_contour(study, target=target).data
    assert [t.type for t in after] == ["scatter", "scatter"]


def test_the_browser_contour_is_hidden_until_its_grid_holds_two_values():
    """drawable_bundle shows optuna-dashboard's browser-side contour trace only from two distinct
    values in its grid (the trigger of the blank Analytics page; the browser test opens the page)."""
    from pathlib import Path

    import optuna_dashboard

    from nova_search.report.dashboard.serve import drawable_bundle

    trace = b'const r=[{type:"contour",x:c,y:u,z:f,colorscale:"Blues",connectgaps:!0,hoverinfo:"none"}]'
    assert drawable_bundle(trace) == (
        b'const r=[{type:"contour",visible:new Set([].concat(...f).filter(v=>v!=null)).size>1,'
        b'x:c,y:u,z:f,colorscale:"Blues",connectgaps:!0,hoverinfo:"none"}]'
    )
    assert drawable_bundle(b"var a=1;") is None  # another release: served as it is
    assert drawable_bundle(trace + trace) is None  # not the one script it was written for
    installed = (Path(optuna_dashboard.__file__).parent / "public" / "bundle.js").read_bytes()
    patched = drawable_bundle(installed)  # the installed release (0.21) has the one trace
    assert patched is not None and patched.count(b"visible:new Set([].concat(...") == 1
