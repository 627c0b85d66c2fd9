"""report.data from hand-made StudyResults (no storage), and the HTML drawn from it."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
from plotly.offline import get_plotlyjs

from nova_search.report.convergence import hypervolume, hypervolume_history, param_importances
from nova_search.report.data import (
    acceptance_table,
    build_report_data,
    cost_table,
    latency_table,
    pareto_points,
    saturation_table,
    throughput_table,
)
from nova_search.report.html.render import render_html, write_report
from nova_search.results.select import stock_trial, tuned_baseline
from nova_search.results.speculation import verdict_of
from tests.support.builders import full_report_study
from tests.support.builders import level as lv
from tests.support.builders import report_study as study
from tests.support.builders import report_trial as mk


@pytest.fixture
def full():
    return full_report_study()


def test_stock_and_tuned(full):
    assert stock_trial(full).number == 0
    assert tuned_baseline(full).number == 1  # speculative 3 and infeasible 4 never count
    faster_stock = study(mk(0, [lv(8, 5000, 1)], role="stock"), mk(1, [lv(8, 10, 1)]))
    assert tuned_baseline(faster_stock).number == 0  # nothing beat stock: stock is the tuned configuration


def test_throughput_table_per_concurrency(full):
    rows = throughput_table(stock_trial(full), tuned_baseline(full))
    assert [(r.concurrency, r.stock_tok_s, r.tuned_tok_s) for r in rows] == [(1, 100, 110), (8, 400, 600)]
    assert rows[0].delta_pct == pytest.approx(10.0)
    assert rows[1].delta_pct == pytest.approx(50.0)
    # a level only one side measured: no %
    rows = throughput_table(mk(0, [lv(8, 400, 80)], role="stock"), mk(1, [lv(1, 100, 10), lv(8, 800, 5)]))
    assert [(r.concurrency, r.stock_tok_s, r.delta_pct) for r in rows] == [(1, None, None), (8, 400, 100.0)]
    assert [r.stock_tok_s for r in throughput_table(None, tuned_baseline(full))] == [None, None]


def test_latency_table(full):
    rows = latency_table(stock_trial(full), tuned_baseline(full))
    assert [(r.concurrency, r.which, r.trial_number) for r in rows] == [
        (1, "stock", "0"),
        (1, "tuned", "1"),
        (8, "stock", "0"),
        (8, "tuned", "1"),
    ]
    r = rows[3]
    assert (r.ttft_mean_ms, r.ttft_p99_ms, r.tpot_p99_ms, r.itl_mean_ms, r.e2e_p99_ms) == (
        30,
        60,
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
    assert [r.trial_number for r in rows] == ["0", "1"]  # one level: not judged
    assert (rows[0].concurrency, rows[0].limiter, rows[0].output_throughput) == (8, "kv_cache", 400)
    assert rows[1].concurrency is None and "still grows" in rows[1].explanation


def test_acceptance_only_where_a_drafter_ran(full):
    rows = acceptance_table(full)
    assert [
        (r.trial_number, r.method, r.num_speculative_tokens, r.concurrency, r.acceptance_rate) for r in rows
    ] == [
        ("3", "ngram", 3, 1, 0.6),
        ("3", "ngram", 3, 8, 0.5),
    ]


def test_pareto_points(full):
    pts = {p.trial_number: p for p in pareto_points(full)}
    assert set(pts) == {"0", "1", "2", "3", "4"}  # the FAIL trial has no values
    assert [n for n, p in pts.items() if p.on_front] == ["2", "3"]
    assert not pts["4"].feasible and pts["3"].values == (700, 90)


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
    assert [p.trial_number for p in history] == ["0", "1", "2", "3"]  # feasible COMPLETE, completion order
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
    stock, tuned = stock_trial(full), tuned_baseline(full)
    assert cost_table(stock, tuned, None) == []
    rows = cost_table(stock, replace(tuned, config=tuned.config.with_values(tensor_parallel_size=2)), 3.6)
    by = {(r.concurrency, r.which): r for r in rows}
    assert by[(8, "stock")].usd_per_1m_tokens == pytest.approx(3.6 / (400 * 3600) * 1e6)  # 2.5
    assert by[(8, "stock")].usd_per_1m_tokens == pytest.approx(2.5)
    assert by[(8, "tuned")].gpus == 2
    assert by[(8, "tuned")].usd_per_1m_tokens == pytest.approx(2 * 3.6 / (600 * 3600) * 1e6)


def test_notes_say_what_is_missing():
    data = build_report_data(study(mk(1, [lv(1, 10, 1), lv(8, 20, 2)])))
    text = " ".join(data.notes)
    assert "No stock baseline" in text
    assert "Fewer than 2 COMPLETE trials (1)" in text
    assert "Cost omitted" in text
    assert "parameter importances need at least 2" in text
    assert data.stock_trial is None and data.tuned_trial == "1"
    failed = mk(0, [lv(8, 1, 1)], role="stock", state="FAIL", reason="oom", message="CUDA OOM")
    data = build_report_data(study(failed))
    text = " ".join(data.notes)
    assert "stock baseline (trial 0) ended FAIL (oom: CUDA OOM)" in text
    assert "No feasible COMPLETE non-speculative trial" in text and "no hypervolume history" in text
    with pytest.raises(ValueError, match="positive"):
        build_report_data(study(failed), gpu_hour_usd=-1)


def test_a_client_bound_trial_is_named_in_the_notes_and_the_page():
    bound = mk(1, [lv(1, 10, 1), lv(8, 20, 2, client_bound=True, client_note="busiest process 97 %")])
    data = build_report_data(study(bound))
    (note,) = [n for n in data.notes if "client-bound" in n]
    assert note.startswith("Trial 1 was client-bound at concurrency 8:") and "sweep.client_cpus" in note
    assert "Trial 1 was client-bound at concurrency 8" in render_html(data)
    assert not [n for n in build_report_data(study(mk(1, [lv(8, 20, 2)]))).notes if "client-bound" in n]


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
    assert page.count('class="plotly-graph-div"') == 7  # six + tok/s per user vs per GPU
    assert page.count(get_plotlyjs()[:300]) == 1  # plotly.js inlined exactly once
    assert "CUDA out of memory" in page  # the failed trial's reason
    assert "<td>50</td>" in page  # % vs stock at concurrency 8, to 4 significant digits
    out = write_report(data, tmp_path / "sub" / "r.html")
    assert out.read_text().startswith("<!DOCTYPE html>")
    assert [p.name for p in out.parent.iterdir()] == ["r.html"]  # no temporary file left behind

    sparse = render_html(build_report_data(study(mk(1, [lv(8, 20, 2)]))))
    assert 'class="missing"' in sparse and "No stock baseline" in sparse
    assert "No price given (--gpu-hour-usd)" in sparse


def test_saturation_judges_growth_against_the_repeats():
    levels = [lv(1, 100, 1), lv(8, 110, 2)]  # +10 %: growth beyond the 5 % tolerance
    plain = mk(0, levels)
    windows = {1: (90, 100, 110, 95, 105), 8: (80, 110, 140, 100, 120)}
    noisy = replace(
        plain, windows={c: tuple({"output_throughput": v} for v in vs) for c, vs in windows.items()}
    )
    (a,) = saturation_table(study(plain))
    (b,) = saturation_table(study(noisy))
    assert a.concurrency is None  # without repeats it still grows
    assert b.concurrency == 1  # with them the gain is within the noise


def test_stock_vs_tuned_vs_speculative_and_the_policy(full):
    data = build_report_data(full)
    v = data.verdict
    assert v is not None and v.tuned == "1"  # the verdict's tuned: the best non-speculative trial
    (ngram,) = v.drafters
    assert ngram.status == "not_enough_evidence" and "not enough evidence (n=1" in ngram.reason
    rows = {r.concurrency: r for r in data.speculative}
    assert rows[8].stock_tok_s == 400 and rows[8].tuned_tok_s == 600 and rows[8].spec_tok_s == 700
    assert rows[8].spec_trial == "3" and rows[8].spec_method == "ngram"
    assert rows[8].tuned_vs_stock_pct == pytest.approx(50.0)
    assert rows[8].spec_vs_tuned_pct == pytest.approx(700 / 600 * 100 - 100)
    html = render_html(data)
    assert "Stock vs tuned vs speculative, the verdict and the policy" in html
    assert "Deployment policy" in html and "not enough evidence" in html


def test_no_speculative_trial_means_no_verdict_and_says_so():
    data = build_report_data(study(mk(0, [lv(8, 100, 20)], role="stock"), mk(1, [lv(8, 120, 18)])))
    assert data.verdict is None and data.speculative == ()
    assert any("no verdict" in n for n in data.notes)


def test_a_speculative_trial_whose_greedy_output_diverged_is_flagged(full):
    from nova_search.measure.records import ReferenceOutputs

    same = ReferenceOutputs(token_ids=((1, 2, 3, 4),) * 8, errors=("",) * 8)
    other = ReferenceOutputs(token_ids=((9, 9, 9, 9),) * 8, errors=("",) * 8)
    trials = [replace(t, reference=same) for t in full.trials]
    ok = replace(full, trials=tuple(trials))
    assert [d.status for d in verdict_of(ok).drafters] == ["not_enough_evidence"]  # equivalent
    trials[3] = replace(trials[3], reference=other)
    bad = verdict_of(replace(full, trials=tuple(trials)))
    (d,) = bad.drafters
    assert d.status == "flagged" and "diverged" in d.reason
