"""The committed H200 study of every drafter on the Qwen3-8B shape (benchmarks/results/h200-qwen3-8b-drafters,
random weights): the summary is what the summary script computes from the committed storage; every
drafter booted and kept the tuned output; the verdict rejects the three learned drafters on their
verified losses, and the README quotes the summary."""

from __future__ import annotations

import json

import pytest

from benchmarks.h200 import trained_summary
from nova_search.api import load_results, verdict_of
from tests.support import REPO
from tests.support.trained import assert_readme_quotes_summary

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


def test_the_readme_quotes_the_summary() -> None:
    readme = (RESULTS / "README.md").read_text()
    assert_readme_quotes_summary(readme, SUMMARY)
    assert "that is no claim about n-gram" in readme
