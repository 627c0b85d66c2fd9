"""The committed H200 study on the GPU pair (benchmarks/results/trained-h200, the staged study cut
short after n-gram): its summary is what the summary script computes from the committed storage,
policy and dump; the verdict read from the storage now gives n-gram two verified ranges, not one span
across its losses, and names the drift between two measurements of one configuration; the README
quotes the summary's figures."""

from __future__ import annotations

import importlib.util
import json

from nova_search.api import load_results, verdict_of
from tests.support import REPO

RESULTS = REPO / "benchmarks" / "results" / "trained-h200"
STUDY = "trained-h200-speculative"
SUMMARY = json.loads((RESULTS / "summary.json").read_text())


def _script():
    spec = importlib.util.spec_from_file_location(
        "trained_h200_summary", REPO / "benchmarks" / "h200" / "trained_summary.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_summary_is_the_committed_study() -> None:
    assert _script().summarize(RESULTS) == SUMMARY
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


def test_the_readme_quotes_the_summary() -> None:
    readme = (RESULTS / "README.md").read_text()
    for g in SUMMARY["drafters"]["ngram"]["per_level"]:
        assert f"{g['diff_pct']:+.1f} % [{g['ci_low']:+.1f}, {g['ci_high']:+.1f}]" in readme
    for c, r in SUMMARY["same_config_twice"].items():
        assert f"{r['diff_pct']:+.1f} % [{r['ci'][0]:+.1f}, {r['ci'][1]:+.1f}]" in readme, c
    for c, a in SUMMARY["acceptance"]["speculative#1"]["per_level"].items():
        assert f"{a['acceptance_rate']:.2f} ({a['mean_acceptance_length']:.2f})" in readme, c
    gpu = SUMMARY["gpu_time_s"]
    assert f"{sum(gpu.values()):.0f} s, of which windows {gpu['windows']:.0f} s" in readme
