"""The committed H200 study of every drafter on the Qwen3-8B shape (benchmarks/results/h200-qwen3-8b-drafters,
random weights): the summary is what the summary script computes from the committed storage; every
drafter booted and kept the tuned output; the verdict rejects the three learned drafters on their
verified losses, and the figures quoted are the kept data's."""

from __future__ import annotations

import json

import pytest

from nova_search.api import load_results, verdict_of
from tests.support import REPO
from tests.support.scripts import benchmark_script
from tests.support.trained import quoted_figures

trained_summary = benchmark_script("gpu/trained_summary.py")

pytestmark = pytest.mark.recorded

RESULTS = REPO / "benchmarks" / "results" / "h200-qwen3-8b-drafters"
STUDY = "h200-qwen3-8b-drafters"
SUMMARY = json.loads((RESULTS / "summary.json").read_text())


def test_the_summary_is_the_committed_study() -> None:
    assert trained_summary.summarize(RESULTS, STUDY) == SUMMARY
    assert SUMMARY["trials"] == {"COMPLETE": 5, "PRUNED": 0, "FAIL": 0}
    assert SUMMARY["gpu_time_s"]["failed_boot"] == 0


def test_every_drafter_served_and_the_verdict_rejects_the_random_heads_on_their_data() -> None:
    v = verdict_of(load_results(STUDY, f"sqlite:///{RESULTS / 'study.db'}"))
    judged = {d.method: d for d in v.drafters}
    assert set(judged) == {"eagle3", "dflash", "draft_model", "ngram"}
    for method in ("eagle3", "dflash", "draft_model"):
        d = judged[method]
        assert d.status == "rejected" and d.verified_ranges == ()
        assert [g.verdict for g in d.per_level] == ["verified_loss"] * 3, method
        assert {(g.n_tuned, g.n_candidate) for g in d.per_level} == {(3, 3)}
    # random weights: vLLM accepted none of the learned drafters' tokens, and n-gram nearly all
    for trial in SUMMARY["acceptance"].values():
        rates = {a["acceptance_rate"] for a in trial["per_level"].values()}
        if trial["method"] == "ngram":
            assert min(rates) > 0.99, rates
        else:
            assert rates == {0.0}, trial["method"]
    assert judged["ngram"].verified_ranges == ((1, 64),)
    assert {e["exact"] for e in SUMMARY["equivalence"].values()} == {"8/8"}
    assert len(SUMMARY["equivalence"]) == 4


def test_the_quoted_figures_are_the_kept_datas() -> None:
    """The figures the study's write-up quotes, recomputed from the kept data."""
    assert quoted_figures(trained_summary.summarize(RESULTS, STUDY)) == {
        "gains": [
            "-26.4 % [-26.5, -26.2]",
            "-23.8 % [-23.9, -23.7]",
            "-29.7 % [-30.6, -29.4]",
            "-31.5 % [-33.1, -28.0]",
            "-30.8 % [-31.9, -29.1]",
            "-38.7 % [-40.8, -37.8]",
            "-23.5 % [-23.8, -23.1]",
            "-22.5 % [-22.9, -22.4]",
            "-30.4 % [-31.3, -30.2]",
            "+150.7 % [+147.9, +173.1]",
            "+121.4 % [+112.2, +122.8]",
            "+59.0 % [+54.5, +59.7]",
        ],
        "acceptance": {
            "eagle3": "0.00 (1.00) / 0.00 (1.00) / 0.00 (1.00)",
            "dflash": "0.00 (1.00) / 0.00 (1.00) / 0.00 (1.00)",
            "draft_model": "0.00 (1.00) / 0.00 (1.00) / 0.00 (1.00)",
            "ngram": "1.00 (3.97) / 1.00 (3.97) / 1.00 (3.96)",
        },
        "gpu_time": "1084 s, of which windows 409 s",
    }
