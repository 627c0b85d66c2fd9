"""The fleet simulation (benchmarks/fleet_scale.py) at a small N, on a throwaway PostgreSQL of its
own: 8 real worker loops in 4 processes, one of which is killed mid-trial (2 workers, a quarter of
the fleet), on a server of 20 connections (the code before issue 42 held up to 6 a worker and hung
there). The budget is met exactly, no configuration is measured twice, the killed workers'
trials are run again by the others (none lost), no worker hangs, and the dashboard notes (written by
one elected worker at a time) cover every finished trial."""

from __future__ import annotations

import pytest

from benchmarks.fleet_scale import fleet, parser

pytestmark = [pytest.mark.postgres, pytest.mark.faults]  # fault injection at full size: --all


def test_eight_workers_one_killed_process_exact_budget_no_duplicates_no_hang():
    args = parser().parse_args(
        [
            "--workers", "8", "--procs", "4", "--budget", "16", "--trial-s", "2", "--heartbeat-s", "1",
            "--stagger-s", "0", "--kill-frac", "0.25", "--kill-at", "0.2",
            "--max-connections", "20", "--timeout-s", "100",
        ]
    )  # fmt: skip
    result = fleet(args)
    assert result["finished"] and result["hung_processes"] == 0, result
    assert result["killed_workers"] == 2, result
    assert result["counted_toward_budget"] == 16 and result["budget_overshoot"] == 0, result
    assert result["complete"] == 16 and result["lost"] == 0, result
    assert result["duplicates"] == 0, result
    assert result["workers_ok"] == 6 and not result["worker_errors"], result
    # the dashboard notes, written by one worker at a time, cover every finished trial
    assert result["notes_missing"] == 0 and result["study_note"], result
