"""The committed H200 cross-check (benchmarks/results/crosscheck-h200/, issue 16): its summary is in the
issue's format, covers the issue's shapes, and is what ``crosscheck_h200.py --rebuild`` makes of the
committed runs, so every figure in it can be traced to a run."""

from __future__ import annotations

import gzip
import json
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.recorded

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "benchmarks" / "results" / "crosscheck-h200"
MODULE = "benchmarks.gpu.crosscheck_h200"  # run as a module from the repository root
FIGURES = {"output_throughput", "ttft_p50_ms", "tpot_p50_ms"}


def test_the_summary_has_the_issues_shapes_and_format() -> None:
    summary = json.loads((RESULTS / "summary.json").read_text())
    shapes = {(s["input_len"], s["output_len"], s["concurrency"]) for s in summary}
    assert {(512, 256, 16), (1024, 128, 64), (128, 512, 256), (128, 512, 512)} <= shapes
    assert any(i >= 2048 and c >= 64 for i, _, c in shapes)  # the long-prompt shape of our choosing
    for s in summary:
        assert s["num_requests"] > 0 and len(s["pairs"]) >= 3
        for pair in s["pairs"]:
            assert FIGURES <= set(pair["peer"])
            assert FIGURES | {"client_cpu_share", "processes"} <= set(pair["nova"])
            assert pair["nova"]["processes"] >= 1 and 0 < pair["nova"]["client_cpu_share"] < 0.7


def test_the_summary_is_rebuilt_exactly_from_the_committed_runs(tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", MODULE, "--url", "-", "--model", "-", "--tokenizer", "-",
         "--rebuild", str(RESULTS / "runs.jsonl"), "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=120, cwd=REPO,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "summary.json").read_text()) == json.loads(
        (RESULTS / "summary.json").read_text()
    )
    # the table it prints judges each shape against the goal
    assert r.stdout.count("| met |") + r.stdout.count("| missed |") == 5


def test_a_run_without_its_partner_is_refused(tmp_path: Path) -> None:
    rows = (RESULTS / "runs.jsonl").read_text().splitlines()
    broken = tmp_path / "runs.jsonl"
    broken.write_text("\n".join([rows[0], rows[2]]) + "\n")  # pair 0's peer, then pair 0 of another shape
    r = subprocess.run(
        [sys.executable, "-m", MODULE, "--url", "-", "--model", "-", "--tokenizer", "-",
         "--rebuild", str(broken), "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=120, cwd=REPO,
    )  # fmt: skip
    assert r.returncode != 0
    assert "not the second run" in r.stderr


def test_the_committed_request_rows_are_the_runs_they_name() -> None:
    """Each requests/*.jsonl.gz (one run's every request) holds that run's requests: its count, and
    the median TTFT the run reported in runs.jsonl."""
    runs = {
        (r["shape"]["concurrency"], r["shape"]["num_requests"], r["pair"], r["client"]): r
        for r in map(json.loads, (RESULTS / "runs.jsonl").read_text().splitlines())
    }
    files = sorted((RESULTS / "requests").glob("*.jsonl.gz"))
    assert len(files) >= 10
    for path in files:
        m = re.fullmatch(r"\d+-\d+-c(\d+)-n(\d+)-pair(\d+)-(peer|nova)\.jsonl\.gz", path.name)
        assert m, path.name
        run = runs[(int(m[1]), int(m[2]), int(m[3]), m[4])]
        with gzip.open(path, "rt") as f:
            rows = [json.loads(line) for line in f]
        assert len(rows) == run["completed"] and all(r["success"] for r in rows), path.name
        assert statistics.median(r["ttft_ms"] for r in rows) == pytest.approx(run["ttft_p50_ms"], rel=1e-4)
