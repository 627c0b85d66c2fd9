"""What the fleet simulation's tests (benchmarks/fleet_scale.py at a small N) check of every run. The
benchmark runs as a script, from the repository root (the tests import no module of ``benchmarks``);
its result is the JSON line it prints."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from nova_search.testing.fault_table import note
from tests.support import REPO

#: 8 workers in 4 processes, 16 trials of 2 s, one process (2 workers) SIGKILLed at 20 % of the budget
SMALL_FLEET = [
    "--workers", "8", "--procs", "4", "--budget", "16", "--trial-s", "2", "--heartbeat-s", "1",
    "--stagger-s", "0", "--kill-frac", "0.25", "--kill-at", "0.2",
]  # fmt: skip


def fleet(*flags: str) -> dict[str, Any]:
    """One run of ``python -m benchmarks.fleet_scale FLAGS`` from the repository root: its result."""
    run = subprocess.run(
        [sys.executable, "-m", "benchmarks.fleet_scale", *flags],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def run_small_fleet(*extra: str) -> dict[str, Any]:
    """``SMALL_FLEET`` with ``extra`` flags; asserts what every run must hold: it finished with no
    process hung, the killed process's 2 workers were killed, the budget of 16 is met exactly, all 16
    COMPLETE (none lost), no configuration measured twice, the 6 others exited cleanly."""
    result = fleet(*SMALL_FLEET, *extra)
    note(
        "fleet",
        "8 workers, budget 16, 2 killed mid-trial" + (f" ({' '.join(extra)})" if extra else ""),
        lost=result["lost"],
        duplicates=result["duplicates"],
        hung=result["hung_processes"],
    )
    assert result["finished"] and result["hung_processes"] == 0, result
    assert result["killed_workers"] == 2, result
    assert result["counted_toward_budget"] == 16 and result["budget_overshoot"] == 0, result
    assert result["complete"] == 16 and result["lost"] == 0, result
    assert result["duplicates"] == 0, (result["duplicated"], result["retry_warnings"], result)
    assert result["workers_ok"] == 6 and not result["worker_errors"], result
    return result
