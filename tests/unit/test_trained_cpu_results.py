"""The committed trained-pair study (benchmarks/results/trained-cpu, two runs of
studies/experiments/trained-cpu-speculative.yaml): its summary is what the summary script computes from the
committed policies and dumps, the two runs agree, every drafter kept the tuned output, and the draft
model's acceptance, as vLLM counted it, is real."""

from __future__ import annotations

import json

import pytest

from nova_search.api import load_results, verdict_of
from tests.support import REPO
from tests.support.scripts import benchmark_script

trained_cpu_summary = benchmark_script("trained_cpu_summary.py")

pytestmark = pytest.mark.recorded

RESULTS = REPO / "benchmarks" / "results" / "trained-cpu"


def _script():
    return trained_cpu_summary


SUMMARY = json.loads((RESULTS / "summary.json").read_text())


def test_the_summary_is_the_committed_runs() -> None:
    script = _script()
    for run in ("run1", "run2"):
        policy = json.loads((RESULTS / f"policy-{run}.json").read_text())
        dump = json.loads((RESULTS / f"dump-{run}.json").read_text())
        assert SUMMARY[run]["drafters"] == script.drafters(policy)
        assert SUMMARY[run]["policy"] == script.ranges(policy)
        assert SUMMARY[run]["acceptance"] == script.acceptance(dump)
        assert SUMMARY[run]["equivalence"] == script.equivalence(RESULTS, f"trained-cpu-{run}")


def test_the_verdict_and_the_policy_held_across_two_runs() -> None:
    assert SUMMARY["stable"] == {"status": True, "verified_range": True, "policy": True}
    for run in ("run1", "run2"):
        drafters = SUMMARY[run]["drafters"]
        assert {m: d["status"] for m, d in drafters.items()} == {
            "draft_model": "accepted",
            "ngram": "accepted",
            "eagle3": "rejected",
        }
        assert all(
            g["n_tuned"] >= 3 and g["n_candidate"] >= 3 for d in drafters.values() for g in d["per_level"]
        )
        # speculation only where verified: concurrency 1, tuned above it
        assert SUMMARY[run]["policy"] == [[1, 1, "speculative", "draft_model"], [2, None, "tuned", "none"]]
        # the stored verdict reads the same from the committed storage
        results = load_results(f"trained-cpu-{run}", f"sqlite:///{RESULTS / 'study.db'}")
        assert {d.method: d.status for d in verdict_of(results).drafters} == {
            m: d["status"] for m, d in drafters.items()
        }


def test_every_drafter_kept_the_tuned_output_and_the_draft_model_was_accepted() -> None:
    for run in ("run1", "run2"):
        assert SUMMARY[run]["equivalence"] and all(
            e["equivalent"] for e in SUMMARY[run]["equivalence"].values()
        )
        rates = [
            lv["acceptance_rate"]
            for t in SUMMARY[run]["acceptance"].values()
            if t["method"] == "draft_model"
            for lv in t["per_level"].values()
        ]
        assert rates and min(rates) > 0.3
