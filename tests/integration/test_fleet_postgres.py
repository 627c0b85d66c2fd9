"""The fleet simulation (benchmarks/fleet_scale.py) at a small N, on a throwaway PostgreSQL of its
own: 8 real worker loops in 4 processes, one of which is killed mid-trial (2 workers, a quarter of
the fleet), on a server of 20 connections (the code before issue 42 held up to 6 a worker and hung
there). The budget is met exactly, no configuration is measured twice, the killed workers'
trials are run again by the others (none lost), no worker hangs, and the dashboard notes (written by
one elected worker at a time) cover every finished trial."""

from __future__ import annotations

import pytest

from tests.support.fleet import run_small_fleet

pytestmark = [pytest.mark.postgres, pytest.mark.faults]  # fault injection at full size: --all


def test_eight_workers_one_killed_process_exact_budget_no_duplicates_no_hang():
    result = run_small_fleet("--max-connections", "20", "--timeout-s", "100")
    # the dashboard notes, written by one worker at a time, cover every finished trial
    assert result["notes_missing"] == 0 and result["study_note"], result
