"""The committed H200 sleep-mode A/B (benchmarks/results/sleep-ab-h200): its summary is what
``analysis.noise.compare`` makes of its windows, and every window measured the whole workload."""

from __future__ import annotations

import json

import pytest

from nova_search.analysis.noise import compare
from tests.support import REPO

pytestmark = pytest.mark.recorded

RESULTS = REPO / "benchmarks" / "results" / "sleep-ab-h200"


def test_the_summary_is_the_comparison_of_the_committed_windows() -> None:
    summary = json.loads((RESULTS / "summary.json").read_text())
    rows = [json.loads(line) for line in (RESULTS / "windows.jsonl").read_text().splitlines()]
    assert all(r["completed"] == summary["shape"]["requests"] for r in rows)
    pairs = {r["pair"] for r in rows}
    assert len(pairs) == summary["pairs"] >= 8
    # ABBA: each pair has one window of each server, the order alternating
    for p in pairs:
        order = [r["server"] for r in rows if r["pair"] == p]
        assert order == (["S", "F"] if p % 2 == 0 else ["F", "S"])
    assert len(summary["wake_s"]) == summary["pairs"] and max(summary["wake_s"]) < 1.0
    for metric, higher in (("output_tok_s", True), ("ttft_p50_ms", False), ("tpot_p50_ms", False)):
        fresh = [r[metric] for r in rows if r["server"] == "F"]
        woken = [r[metric] for r in rows if r["server"] == "S"]
        c = compare(fresh, woken, higher_is_better=higher)
        assert summary[metric]["woken_vs_fresh_pct"] == pytest.approx(c.diff_pct)
        assert summary[metric]["ci95_pct"] == pytest.approx([c.ci.low, c.ci.high])
        assert summary[metric]["verdict"] == c.verdict == "not_verified"
