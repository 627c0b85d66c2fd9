"""A connection storm on PostgreSQL: every backend of the study's database terminated every 0.25 s
for 150 s while one `nova-search worker` (the stand-in engine, launched as vLLM is) runs a 20-trial
budget. What must come out: exactly 20 trials counted toward the budget, none RUNNING, no internal
failure, every COMPLETE trial with its per-level rows, and the worker exiting 0.

    .venv/bin/python -m benchmarks.storage_storm [--trials 20] [--every-s 0.25] [--for-s 150]

PostgreSQL: NOVA_TEST_PG (default postgresql+psycopg://postgres@127.0.0.1:5432/test); a throwaway
database is created and dropped. Prints figures; asserts nothing. Measure alone: the storm's timing
is the point.
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from pathlib import Path

from nova_search.db import LevelStore
from nova_search.search import lifecycle as nova_study
from nova_search.testing.faults import Storm, outcome
from nova_search.testing.pg import fresh_database
from nova_search.testing.specs import fake_spec
from nova_search.testing.workers import fake_engines, worker


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--every-s", type=float, default=0.25)
    ap.add_argument("--for-s", type=float, default=150.0)
    ap.add_argument("--itl-s", type=float, default=0.03, help="the stand-in's time per token: trial length")
    args = ap.parse_args()
    with fresh_database() as url, tempfile.TemporaryDirectory() as tmp:
        nova_study.create(fake_spec(args.trials), url, "storm")
        t0 = time.monotonic()
        proc = worker(
            url,
            Path(tmp),
            "storm",
            FAKE_ENGINE_ITL_S=str(args.itl_s),
            NOVA_HEARTBEAT_INTERVAL="1",
            NOVA_GRACE_PERIOD="3",
        )
        with Storm(url, every_s=args.every_s, for_s=args.for_s) as storm:
            try:
                out = proc.communicate(timeout=args.for_s + 600)[0]
            except subprocess.TimeoutExpired:
                proc.kill()
                out = proc.communicate()[0]
                print("the worker did not finish: killed")
            storm_s = time.monotonic() - t0
        wall = time.monotonic() - t0
        result = outcome(url, "storm")
        with LevelStore(url) as store:
            rows = store.rows("storm", ("trial_number", "concurrency"))
        levels = {}
        for r in rows:
            levels.setdefault(int(r["trial_number"]), set()).add(int(r["concurrency"]))
        complete = result.states.get("COMPLETE", 0)
        without_rows = complete - len(levels)
        retries = out.count("retrying for up to")
    print(
        f"storm: every {args.every_s:g} s for up to {args.for_s:g} s; {storm.rounds} rounds, "
        f"{storm.killed} backends terminated over {min(storm_s, args.for_s):.0f} s"
    )
    print(f"worker: exit {proc.returncode} after {wall:.0f} s; {retries} retry warnings")
    if proc.returncode != 0:
        print("worker output (end):\n" + out[-3000:])
    print(
        f"trials: {result.total} in all, {result.budget_used} toward the budget of {args.trials}; "
        f"states {result.states}"
    )
    print(f"RUNNING left: {result.running}; internal failures: {len(result.internal)} {result.internal}")
    print(f"COMPLETE trials without their per-level rows: {without_rows}")
    print(f"stand-in engines left running: {len(fake_engines())}")  # fmt: skip


if __name__ == "__main__":
    main()
