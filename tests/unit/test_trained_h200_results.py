"""The committed H200 studies on the GPU pair: benchmarks/results/trained-h200 (the staged study cut
short after n-gram) and benchmarks/results/trained-h200-drafters (every drafter on the tuned stack).
Each summary is what the summary script computes from the committed storage, policy and dump; the
verdict read from the storage gives n-gram two verified ranges, not one span across its losses, and
names the drift between two measurements of one configuration; the figures quoted are the kept data's."""

from __future__ import annotations

import json

import pytest

from nova_search.api import load_results, verdict_of
from tests.support import REPO
from tests.support.scripts import benchmark_script
from tests.support.trained import quoted_figures

trained_summary = benchmark_script("gpu/trained_summary.py")

pytestmark = pytest.mark.recorded

RESULTS = REPO / "benchmarks" / "results" / "trained-h200"
STUDY = "trained-h200-speculative"
SUMMARY = json.loads((RESULTS / "summary.json").read_text())


def test_the_summary_is_the_committed_study() -> None:
    assert trained_summary.summarize(RESULTS) == SUMMARY
    assert SUMMARY["trials"] == {"COMPLETE": 5, "PRUNED": 0, "FAIL": 0}


def test_ngram_is_judged_on_two_verified_ranges_and_kept_the_tuned_output() -> None:
    v = verdict_of(load_results(STUDY, f"sqlite:///{RESULTS / 'study.db'}"))
    (ngram,) = v.drafters
    assert ngram.method == "ngram" and ngram.status == "accepted"
    assert ngram.verified_ranges == ((1, 1), (256, 256))
    assert [g.verdict for g in ngram.per_level] == [
        "verified_gain",
        "not_verified",
        "verified_loss",
        "verified_loss",
        "verified_gain",
    ]
    assert [(r.min_concurrency, r.max_concurrency, r.choice) for r in v.policy] == [
        (1, 1, "speculative"),
        (2, 255, "tuned"),
        (256, 256, "speculative"),
        (257, None, "tuned"),
    ]
    assert any("measured twice" in n for n in v.notes)
    assert SUMMARY["equivalence"] == {"speculative#1": {"equivalent": True, "exact": "8/8"}}
    # the same configuration twice (stock, then the tuned baseline): verified apart at 4, 16 and 64
    drift = {c: r["verdict"] for c, r in SUMMARY["same_config_twice"].items()}
    assert [c for c, verdict in drift.items() if verdict != "not_verified"] == ["4", "16", "64"]


def test_the_quoted_figures_are_the_kept_datas() -> None:
    """The figures the study's write-up quotes, recomputed from the kept data: n-gram's gain per level,
    the drift between two measurements of one configuration, n-gram's acceptance and the GPU time."""
    summary = trained_summary.summarize(RESULTS)
    assert [
        f"{g['diff_pct']:+.1f} % [{g['ci_low']:+.1f}, {g['ci_high']:+.1f}]"
        for g in summary["drafters"]["ngram"]["per_level"]
    ] == [
        "+37.9 % [+14.5, +77.1]",
        "+3.5 % [-8.2, +26.4]",
        "-28.7 % [-31.1, -10.6]",
        "-20.3 % [-37.7, -6.1]",
        "+53.6 % [+43.3, +87.6]",
    ]
    assert {
        c: f"{r['diff_pct']:+.1f} % [{r['ci'][0]:+.1f}, {r['ci'][1]:+.1f}]"
        for c, r in summary["same_config_twice"].items()
    } == {
        "1": "+16.1 % [-1.8, +39.4]",
        "4": "+11.4 % [+7.0, +18.7]",
        "16": "+32.1 % [+12.3, +38.7]",
        "64": "+33.2 % [+11.5, +37.0]",
        "256": "-13.0 % [-20.6, +3.1]",
    }
    figures = quoted_figures(summary)
    assert (
        figures["acceptance"]["ngram"]
        == "0.54 (3.15) / 0.52 (3.08) / 0.52 (3.06) / 0.53 (3.10) / 0.53 (3.10)"
    )
    assert figures["gpu_time"] == "930 s, of which windows 406 s"


# The drafter stage alone on the GPU pair (benchmarks/results/trained-h200-drafters): every drafter,
# the draft model and the EAGLE-3 head on ABBA pairs with the tuned baseline asleep beside them.
DRAFTERS = REPO / "benchmarks" / "results" / "trained-h200-drafters"
DRAFTERS_STUDY = "trained-h200-drafters"
DRAFTERS_SUMMARY = json.loads((DRAFTERS / "summary.json").read_text())


def test_the_drafters_summary_is_the_committed_study() -> None:
    assert trained_summary.summarize(DRAFTERS, DRAFTERS_STUDY) == DRAFTERS_SUMMARY
    assert DRAFTERS_SUMMARY["trials"] == {"COMPLETE": 4, "PRUNED": 0, "FAIL": 0}


def test_every_drafter_is_judged_with_real_acceptance_and_the_tuned_output() -> None:
    v = verdict_of(load_results(DRAFTERS_STUDY, f"sqlite:///{DRAFTERS / 'study.db'}"))
    judged = {d.method: d for d in v.drafters}
    assert set(judged) == {"draft_model", "eagle3", "ngram"}
    assert judged["draft_model"].verified_ranges == ((256, 256),)
    assert judged["draft_model"].per_level[0].verdict == "verified_loss"
    assert judged["eagle3"].verified_ranges == ((1, 4), (256, 256))
    assert judged["ngram"].verified_ranges == ((1, 1), (256, 256))
    # the draft model and EAGLE-3 on 3 pairs a level; n-gram, a worker's first trial, alone
    for method, n in (("draft_model", 3), ("eagle3", 3), ("ngram", 4)):
        assert {(g.n_tuned, g.n_candidate) for g in judged[method].per_level} == {(n, n)}, method
        assert {g.paired for g in judged[method].per_level} == {method != "ngram"}, method
    assert any(n.startswith("speculative#3 judged on unpaired windows") for n in v.notes)
    assert [(r.min_concurrency, r.max_concurrency, r.method) for r in v.policy] == [
        (1, 4, "eagle3"),
        (5, 255, "none"),
        (256, 256, "ngram"),
        (257, None, "none"),
    ]
    # a range of two levels quotes its best level's own interval, not an envelope
    eagle_range, best = v.policy[0], judged["eagle3"].per_level[1]
    assert (eagle_range.gain_level, eagle_range.ci_low) == (4, best.ci_low)
    for trial in DRAFTERS_SUMMARY["acceptance"].values():
        assert all(a["acceptance_rate"] > 0.3 for a in trial["per_level"].values()), trial["method"]
    assert {e["exact"] for e in DRAFTERS_SUMMARY["equivalence"].values()} == {"8/8"}


def test_the_drafters_quoted_figures_are_the_kept_datas() -> None:
    """The figures the drafter study's write-up quotes, recomputed from the kept data."""
    assert quoted_figures(trained_summary.summarize(DRAFTERS, DRAFTERS_STUDY)) == {
        "gains": [
            "-19.9 % [-39.6, -12.7]",
            "+3.7 % [-29.3, +18.4]",
            "-19.8 % [-42.5, +0.8]",
            "+13.6 % [-28.5, +22.1]",
            "+86.5 % [+60.9, +143.2]",
            "+54.2 % [+15.0, +99.7]",
            "+73.5 % [+31.0, +98.8]",
            "+3.1 % [-10.1, +54.4]",
            "+22.4 % [-13.3, +45.3]",
            "+75.5 % [+23.4, +130.1]",
            "+41.0 % [+19.1, +71.9]",
            "+3.1 % [-9.1, +24.0]",
            "+2.6 % [-12.4, +25.6]",
            "+5.8 % [-19.3, +31.3]",
            "+95.6 % [+82.9, +111.4]",
        ],
        "acceptance": {
            "draft_model": "0.55 (3.19) / 0.51 (3.06) / 0.56 (3.22) / 0.56 (3.22) / 0.55 (3.21)",
            "eagle3": "0.57 (3.29) / 0.56 (3.25) / 0.56 (3.23) / 0.56 (3.24) / 0.56 (3.24)",
            "ngram": "0.52 (3.07) / 0.50 (2.99) / 0.49 (2.95) / 0.50 (2.98) / 0.50 (2.98)",
        },
        "gpu_time": "1086 s, of which windows 593 s",
    }
