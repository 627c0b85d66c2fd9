"""report.data from hand-made StudyResults (no storage), and the HTML drawn from it."""

from __future__ import annotations

import itertools
from dataclasses import replace
from datetime import datetime, timedelta

import pytest
from optuna.distributions import CategoricalDistribution, IntDistribution, distribution_to_json
from plotly.offline import get_plotlyjs

from nova_search.api import Objective, StudyResults, TrialResult
from nova_search.metrics import LevelResult
from nova_search.report.data import (
    acceptance_table,
    best_tuned,
    build_report_data,
    cost_table,
    hypervolume,
    hypervolume_history,
    latency_table,
    param_importances,
    pareto_points,
    saturation_table,
    stock_trial,
    throughput_table,
)
from nova_search.report.html import render_html, write_report

OBJECTIVES = (
    Objective("output_throughput@best", "output_throughput", "best", "maximize", 0),
    Objective("ttft_p99_ms@8", "ttft_p99_ms", 8, "minimize", 1),
)
DISTS = {
    "max_num_seqs": distribution_to_json(IntDistribution(1, 256, log=True)),
    "enable_prefix_caching": distribution_to_json(CategoricalDistribution([True, False])),
}
T0 = datetime(2026, 1, 1)


def lv(c: int, tok_s: float, ttft_p99: float, **kw) -> LevelResult:
    base = dict(
        concurrency=c,
        requests=10,
        completed=10,
        errors=0,
        error_rate=0.0,
        duration_s=2.0,
        input_tokens=100,
        output_tokens=int(tok_s * 2),
        output_throughput=tok_s,
        total_token_throughput=tok_s + 50,
        request_throughput=5.0,
        ttft_mean_ms=ttft_p99 / 2,
        ttft_p99_ms=ttft_p99,
        tpot_mean_ms=10.0 + c,
        tpot_p99_ms=20.0 + c,
        itl_mean_ms=9.0 + c,
        itl_p99_ms=30.0 + c,
        e2e_mean_ms=500.0 + c,
        e2e_p99_ms=900.0 + c,
    )
    base.update(kw)
    return LevelResult(**base)


def mk(
    number: int,
    levels: list[LevelResult],
    *,
    role: str = "search",
    state: str = "COMPLETE",
    constraints: dict[str, float] | None = None,
    params: dict | None = None,
    config: dict | None = None,
    **kw,
) -> TrialResult:
    values = None
    if state == "COMPLETE":
        values = (
            max(x.output_throughput for x in levels),
            next(x.ttft_p99_ms for x in levels if x.concurrency == 8),
        )
    constraints = constraints or {}
    if params is None:
        params = (
            {}
            if role == "stock"
            else {"max_num_seqs": 4 * (number + 1), "enable_prefix_caching": number % 2 == 0}
        )
    return TrialResult(
        number=number,
        state=state,
        role=role,
        params=params,
        distributions={k: DISTS[k] for k in params},
        config=config or dict(params),
        values=values,
        constraints=constraints,
        feasible=state == "COMPLETE" and all(v <= 0 for v in constraints.values()),
        levels=tuple(levels),
        argv=("vllm", "serve", "m", "--host", "127.0.0.1", "--port", "1"),
        deployable_argv=("vllm", "serve", "m"),
        datetime_start=T0 + timedelta(minutes=number),
        datetime_complete=T0 + timedelta(minutes=number, seconds=30),
        **kw,
    )


SPEC = {"method": "ngram", "num_speculative_tokens": 3}


def study(*trials: TrialResult, pareto: tuple[int, ...] = ()) -> StudyResults:
    return StudyResults("rep", "sqlite:///r.db", OBJECTIVES, tuple(trials), pareto_numbers=pareto)


@pytest.fixture
def full() -> StudyResults:
    return study(
        mk(0, [lv(1, 100, 20), lv(8, 400, 80)], role="stock"),
        mk(1, [lv(1, 110, 18), lv(8, 600, 60)]),
        mk(2, [lv(1, 90, 10), lv(8, 500, 40)]),
        mk(
            3,
            [
                lv(1, 150, 15, spec_acceptance_rate=0.6, spec_mean_acceptance_length=2.8),
                lv(8, 700, 90, spec_acceptance_rate=0.5, spec_mean_acceptance_length=2.5),
            ],
            config={"max_num_seqs": 16, "speculative": SPEC},
        ),
        mk(4, [lv(1, 999, 1), lv(8, 9999, 1)], constraints={"c": 1.0}),  # infeasible
        mk(5, [lv(1, 50, 10)], state="FAIL", reason="oom", message="CUDA out of memory"),
        pareto=(2, 3),
    )


def test_stock_and_best_tuned(full):
    assert stock_trial(full).number == 0
    assert best_tuned(full).number == 3  # infeasible 4 and the stock never count
    faster_stock = study(mk(0, [lv(8, 5000, 1)], role="stock"), mk(1, [lv(8, 10, 1)]))
    assert best_tuned(faster_stock).number == 1


def test_throughput_table_per_concurrency(full):
    rows = throughput_table(stock_trial(full), best_tuned(full))
    assert [(r.concurrency, r.stock_tok_s, r.tuned_tok_s) for r in rows] == [(1, 100, 150), (8, 400, 700)]
    assert rows[0].delta_pct == pytest.approx(50.0)
    assert rows[1].delta_pct == pytest.approx(75.0)
    # a level only one side measured: no %
    rows = throughput_table(mk(0, [lv(8, 400, 80)], role="stock"), mk(1, [lv(1, 100, 10), lv(8, 800, 5)]))
    assert [(r.concurrency, r.stock_tok_s, r.delta_pct) for r in rows] == [(1, None, None), (8, 400, 100.0)]
    assert [r.stock_tok_s for r in throughput_table(None, best_tuned(full))] == [None, None]


def test_latency_table(full):
    rows = latency_table(stock_trial(full), best_tuned(full))
    assert [(r.concurrency, r.which, r.trial_number) for r in rows] == [
        (1, "stock", 0),
        (1, "tuned", 3),
        (8, "stock", 0),
        (8, "tuned", 3),
    ]
    r = rows[3]
    assert (r.ttft_mean_ms, r.ttft_p99_ms, r.tpot_p99_ms, r.itl_mean_ms, r.e2e_p99_ms) == (
        45,
        90,
        28,
        17,
        908,
    )


def test_saturation_per_trial():
    flat = mk(
        0,
        [
            lv(1, 100, 1, kv_cache_usage_peak=0.3, num_waiting_mean=0.0),
            lv(8, 400, 2, kv_cache_usage_peak=0.95, num_waiting_mean=0.0, preemptions=3.0),
            lv(16, 405, 3, kv_cache_usage_peak=0.99, num_waiting_mean=2.0),
        ],
        role="stock",
        params={},
    )
    growing = mk(1, [lv(1, 100, 1), lv(8, 600, 2)])
    one = mk(2, [lv(8, 100, 1)])
    rows = saturation_table(study(flat, growing, one))
    assert [r.trial_number for r in rows] == [0, 1]  # one level: not judged
    assert (rows[0].concurrency, rows[0].limiter, rows[0].output_throughput) == (8, "kv_cache", 400)
    assert rows[1].concurrency is None and "still grows" in rows[1].explanation


def test_acceptance_only_where_a_drafter_ran(full):
    rows = acceptance_table(full)
    assert [
        (r.trial_number, r.method, r.num_speculative_tokens, r.concurrency, r.acceptance_rate) for r in rows
    ] == [
        (3, "ngram", 3, 1, 0.6),
        (3, "ngram", 3, 8, 0.5),
    ]


def test_pareto_points(full):
    pts = {p.trial_number: p for p in pareto_points(full)}
    assert set(pts) == {0, 1, 2, 3, 4}  # the FAIL trial has no values
    assert [n for n, p in pts.items() if p.on_front] == [2, 3]
    assert not pts[4].feasible and pts[3].values == (700, 90)


def test_hypervolume_exact():
    assert hypervolume([(1.0, 3.0), (2.0, 2.0), (3.0, 1.0)], (4.0, 4.0)) == pytest.approx(3 + 2 + 1)
    assert hypervolume([(5.0, 5.0)], (4.0, 4.0)) == 0.0
    assert hypervolume([(1.0,)], (3.0,)) == 2.0
    # 3-D against a brute-force grid count (integer coordinates)
    pts = [(0, 2, 1), (1, 0, 2), (2, 1, 0), (1, 1, 1)]
    ref = (3, 3, 3)
    cells = sum(
        1
        for x, y, z in itertools.product(range(3), repeat=3)
        if any(p[0] <= x and p[1] <= y and p[2] <= z for p in pts)
    )
    assert hypervolume(pts, ref) == pytest.approx(cells)


def test_hypervolume_history(full):
    history, ref = hypervolume_history(full)
    assert [p.trial_number for p in history] == [0, 1, 2, 3]  # feasible COMPLETE, completion order
    hv = [p.hypervolume for p in history]
    assert hv == sorted(hv) and hv[0] > 0
    # reference: worst of each objective, 10 % of the range further (in the objective's own terms)
    assert ref == pytest.approx((400 - 0.1 * 300, 90 + 0.1 * 50))
    # by hand: minimize (-tok, ttft); ref (-370, 95)
    points = [(-400, 80), (-600, 60), (-500, 40), (-700, 90)]
    assert hv[-1] == pytest.approx(hypervolume(points, (-370, 95)))
    assert hypervolume_history(study(mk(5, [lv(8, 1, 1)], state="FAIL"))) == ([], None)


def test_importances_need_two_trials_with_params(full):
    imps, note = param_importances(full)
    assert note is None
    assert [i.objective for i in imps] == ["output_throughput@best", "ttft_p99_ms@8"]
    for imp in imps:
        names = {k for k, _ in imp.importances}
        assert names <= {"max_num_seqs", "enable_prefix_caching"} and names, imp
        assert sum(v for _, v in imp.importances) == pytest.approx(1.0)
    imps, note = param_importances(study(mk(0, [lv(8, 1, 1)], role="stock"), mk(1, [lv(8, 2, 1)])))
    assert imps == [] and "at least 2" in note and "(this study has 1)" in note


def test_cost_per_million_tokens(full):
    stock, tuned = stock_trial(full), best_tuned(full)
    assert cost_table(stock, tuned, None) == []
    rows = cost_table(stock, replace(tuned, config={**tuned.config, "tensor_parallel_size": 2}), 3.6)
    by = {(r.concurrency, r.which): r for r in rows}
    assert by[(8, "stock")].usd_per_1m_tokens == pytest.approx(3.6 / (400 * 3600) * 1e6)  # 2.5
    assert by[(8, "stock")].usd_per_1m_tokens == pytest.approx(2.5)
    assert by[(8, "tuned")].gpus == 2
    assert by[(8, "tuned")].usd_per_1m_tokens == pytest.approx(2 * 3.6 / (700 * 3600) * 1e6)


def test_notes_say_what_is_missing():
    data = build_report_data(study(mk(1, [lv(1, 10, 1), lv(8, 20, 2)])))
    text = " ".join(data.notes)
    assert "No stock baseline" in text
    assert "Fewer than 2 COMPLETE trials (1)" in text
    assert "Cost omitted" in text
    assert "parameter importances need at least 2" in text
    assert data.stock_trial is None and data.tuned_trial == 1
    failed = mk(0, [lv(8, 1, 1)], role="stock", state="FAIL", reason="oom", message="CUDA OOM")
    data = build_report_data(study(failed))
    text = " ".join(data.notes)
    assert "stock baseline (trial 0) ended FAIL (oom: CUDA OOM)" in text
    assert "No feasible COMPLETE tuned" in text and "no hypervolume history" in text
    with pytest.raises(ValueError, match="positive"):
        build_report_data(study(failed), gpu_hour_usd=-1)


def test_html_has_tables_figures_and_notes(full, tmp_path):
    data = build_report_data(full, gpu_hour_usd=2.0)
    page = render_html(data)
    for cls in (
        "summary",
        "throughput",
        "latency",
        "cost",
        "pareto",
        "hypervolume",
        "importances",
        "saturation",
    ):
        assert f'<table class="{cls}">' in page, cls
    assert '<table class="acceptance">' in page and '<table class="trials">' in page
    assert page.count('class="plotly-graph-div"') == 6
    assert page.count(get_plotlyjs()[:300]) == 1  # plotly.js inlined exactly once
    assert "CUDA out of memory" in page  # the failed trial's reason
    assert "<td>75</td>" in page  # % vs stock at concurrency 8, to 4 significant digits
    out = write_report(data, tmp_path / "sub" / "r.html")
    assert out.read_text().startswith("<!DOCTYPE html>")
    assert [p.name for p in out.parent.iterdir()] == ["r.html"]  # no temporary file left behind

    sparse = render_html(build_report_data(study(mk(1, [lv(8, 20, 2)]))))
    assert 'class="missing"' in sparse and "No stock baseline" in sparse
    assert "No price given (--gpu-hour-usd)" in sparse


def test_saturation_judges_growth_against_the_repeats():
    levels = [lv(1, 100, 1), lv(8, 110, 2)]  # +10 %: growth beyond the 5 % tolerance
    plain = mk(0, levels)
    noisy = replace(plain, repeats={1: (90, 100, 110, 95, 105), 8: (80, 110, 140, 100, 120)})
    (a,) = saturation_table(study(plain))
    (b,) = saturation_table(study(noisy))
    assert a.concurrency is None  # without repeats it still grows
    assert b.concurrency == 1  # with them the gain is within the noise


def test_stock_vs_tuned_vs_speculative_and_the_policy(full):
    data = build_report_data(full)
    v = data.verdict
    assert v is not None and v.tuned == "1"  # the verdict's tuned: the best non-speculative trial
    (ngram,) = v.drafters
    assert ngram.status == "rejected" and "too few windows" in ngram.reason
    rows = {r.concurrency: r for r in data.speculative}
    assert rows[8].stock_tok_s == 400 and rows[8].tuned_tok_s == 600 and rows[8].spec_tok_s == 700
    assert rows[8].spec_trial == "3" and rows[8].spec_method == "ngram"
    assert rows[8].tuned_vs_stock_pct == pytest.approx(50.0)
    assert rows[8].spec_vs_tuned_pct == pytest.approx(700 / 600 * 100 - 100)
    html = render_html(data)
    assert "Stock vs tuned vs speculative, the verdict and the policy" in html
    assert "Deployment policy" in html and "rejected" in html


def test_no_speculative_trial_means_no_verdict_and_says_so():
    data = build_report_data(study(mk(0, [lv(8, 100, 20)], role="stock"), mk(1, [lv(8, 120, 18)])))
    assert data.verdict is None and data.speculative == ()
    assert any("no verdict" in n for n in data.notes)


def test_a_speculative_trial_whose_greedy_output_diverged_is_flagged(full):
    from nova_search.api import verdict_of
    from nova_search.records import ReferenceOutputs

    same = ReferenceOutputs(token_ids=((1, 2, 3, 4),) * 8, errors=("",) * 8)
    other = ReferenceOutputs(token_ids=((9, 9, 9, 9),) * 8, errors=("",) * 8)
    trials = [replace(t, reference=same) for t in full.trials]
    ok = replace(full, trials=tuple(trials))
    assert [d.status for d in verdict_of(ok).drafters] == ["rejected"]  # judged, equivalent
    trials[3] = replace(trials[3], reference=other)
    bad = verdict_of(replace(full, trials=tuple(trials)))
    (d,) = bad.drafters
    assert d.status == "flagged" and "diverged" in d.reason
