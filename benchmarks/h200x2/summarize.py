"""The summary of a multi-GPU study (issue 12) from its dump (``nova-search dump``) and the run's folder:
trials by state and tensor-parallel size, the budget against the trials that count, GPU time per GPU
(each trial's span charged to the GPUs its server was given), any two trials that held one GPU at
once (there must be none), the retry of a killed worker's trial, and the wall time against what one
worker would have needed (the sum of the trials' spans: one worker runs them one after another).

    python3 -m benchmarks.h200x2.summarize dump.json RUN_DIR > summary.json

RUN_DIR may hold ``gpu.csv`` (nvidia-smi timestamp, index, utilization %, memory MiB, once a second),
``phase-a.start``/``phase-b.start`` (epoch seconds) and ``killed`` (run.sh's SIGKILL line)."""

from __future__ import annotations

import csv
import datetime as dt
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any


def _time(s: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(s) if s else None


def spans(trials: list[dict[str, Any]]) -> list[tuple[int, tuple[int, ...], dt.datetime, dt.datetime]]:
    """(number, gpus, start, end) of every trial that ran on a known set of GPUs."""
    out = []
    for t in trials:
        start, end = _time(t.get("datetime_start")), _time(t.get("datetime_complete"))
        gpus = tuple((t.get("worker") or {}).get("gpus") or ())
        if start and end and gpus:
            out.append((t["number"], gpus, start, end))
    return out


def overlaps(sp: list[tuple[int, tuple[int, ...], dt.datetime, dt.datetime]]) -> list[dict[str, Any]]:
    """Pairs of trials that held a GPU at the same time."""
    found = []
    for i, (a, ga, sa, ea) in enumerate(sp):
        for b, gb, sb, eb in sp[i + 1 :]:
            shared = set(ga) & set(gb)
            if shared and sa < eb and sb < ea:
                found.append({"trials": [a, b], "gpus": sorted(shared)})
    return found


def gpu_samples(path: Path) -> dict[str, Any]:
    """Mean utilization per GPU and the share of samples above 0 % (from nvidia-smi's CSV)."""
    if not path.exists():
        return {}
    util: dict[str, list[float]] = defaultdict(list)
    with path.open() as f:
        for row in csv.reader(f):
            if len(row) < 3:
                continue
            try:
                util[row[1].strip()].append(float(row[2].strip().rstrip(" %")))
            except ValueError:
                continue
    return {
        g: {
            "samples": len(v),
            "mean_utilization_pct": round(sum(v) / len(v), 1),
            "busy_share": round(sum(x > 0 for x in v) / len(v), 3),
        }
        for g, v in sorted(util.items())
        if v
    }


def summarize(dump: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    trials = dump["trials"]
    sp = spans(trials)
    by_state: dict[str, int] = defaultdict(int)
    by_tp: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for t in trials:
        by_state[t["state"]] += 1
        tp = (t.get("config") or {}).get("tensor_parallel_size") or 1
        by_tp[str(tp)][t["state"]] += 1
    gpu_time: dict[str, float] = defaultdict(float)
    for _, gpus, start, end in sp:
        for g in gpus:
            gpu_time[str(g)] += (end - start).total_seconds()
    wall = (max(e for *_, e in sp) - min(s for _, _, s, _ in sp)).total_seconds() if sp else 0.0
    serial = sum((e - s).total_seconds() for *_, s, e in sp)
    killed = run_dir / "killed"
    return {
        "study": dump.get("study"),
        "budget": dump.get("budget"),
        "budget_used": dump.get("budget_used"),
        "trials": len(trials),
        "by_state": dict(by_state),
        "by_tensor_parallel_size": {k: dict(v) for k, v in sorted(by_tp.items())},
        "retries": [{"trial": t["number"], "retry_of": t["retry_of"]} for t in trials if t.get("retry_of")],
        "failed": [
            {"trial": t["number"], "reason": t.get("reason"), "gpus": (t.get("worker") or {}).get("gpus")}
            for t in trials
            if t["state"] == "FAIL"
        ],
        "gpu_time_s": {g: round(v, 1) for g, v in sorted(gpu_time.items())},
        "gpu_time_share": {g: round(v / sum(gpu_time.values()), 3) for g, v in sorted(gpu_time.items())}
        if gpu_time
        else {},
        "gpu_overlaps": overlaps(sp),
        "wall_s": round(wall, 1),
        "one_worker_s": round(serial, 1),
        "gpu_samples": gpu_samples(run_dir / "gpu.csv"),
        "killed": killed.read_text().strip() if killed.exists() else None,
    }


def main() -> None:
    dump = json.loads(Path(sys.argv[1]).read_text())
    print(json.dumps(summarize(dump, Path(sys.argv[2])), indent=2))


if __name__ == "__main__":
    main()
