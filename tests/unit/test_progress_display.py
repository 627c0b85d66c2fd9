"""The live progress display (issue 53): the study's row is never cut at 80 or 120 columns (it folds
onto further lines: trial i of N, the ETA, the running best all shown), and its ETA counts down between
events, as the display refreshes, with no event to move it."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

import nova_search.report.progress as progress
from nova_search.report.progress import RichReporter
from nova_search.trial.context import TrialEnd

OBJECTIVES = (("output_throughput@best", True), ("ttft_p99_ms@64", False), ("tpot_p50_ms@16", False))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _rows(reporter: RichReporter, width: int) -> str:
    """The display as the terminal would show it at ``width`` columns."""
    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=True, color_system=None)
    console.print(reporter.progress.make_tasks_table(reporter.progress.tasks))
    return out.getvalue()


@pytest.fixture
def reporter(monkeypatch: pytest.MonkeyPatch) -> tuple[RichReporter, Clock]:
    clock = Clock()
    monkeypatch.setattr(progress.time, "monotonic", clock)
    console = Console(file=io.StringIO(), width=80, force_terminal=True, color_system=None)
    r = RichReporter(console, total=6, objectives=OBJECTIVES)
    r.budget(1, 6, 2)
    r.trial_started(0, "max_num_seqs=64")
    clock.now += 120
    r.trial_finished(TrialEnd(0, "COMPLETE", "ok", values=(1234.5678, 456.789, 12.3456), feasible=True))
    r.budget(2, 6, 2)
    r.trial_started(1, "max_num_seqs=128")
    r.phase(1, "reference outputs (greedy) for the verdict of the drafter against its base")
    return r, clock


@pytest.mark.parametrize("width", [80, 120])
def test_the_study_row_folds_and_is_never_cut(reporter, width: int) -> None:
    r, _ = reporter
    text = r.study_text()
    assert "ETA" in text and "tpot_p50_ms@16 ↓ 12.35 (#0)" in text and "2 refused" in text
    shown = _rows(r, width)
    assert "…" not in shown
    assert max(len(line) for line in shown.splitlines()) <= width
    flat = " ".join(shown.split())
    assert " ".join(text.split()) in flat  # every word, in order, on as many lines as it takes
    assert "reference outputs (greedy) for the verdict of the drafter against its base" in flat


def test_the_eta_counts_down_between_events(reporter) -> None:
    r, clock = reporter
    # 4 trials left after the running one, 120 s each, the running one just started: 4 x 120 + 120
    assert "ETA 10m00s" in r.study_text()
    before = _rows(r, 120)
    clock.now += 50  # no event: the display refreshes
    assert "ETA 9m10s" in r.study_text()
    assert "ETA 9m10s" in " ".join(_rows(r, 120).split()) and before != _rows(r, 120)
