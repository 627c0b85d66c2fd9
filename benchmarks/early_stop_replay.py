"""Benchmark (prints figures): what the early-stop rule (spec ``early_stop``, analysis/dominance.py)
would have saved on a recorded study, and whether it would ever have stopped a trial that ended on the
Pareto front.

The trials are replayed in the order they ran (trial number; the recorded H200 study ran one worker).
After each level but the last, a trial is judged against the feasible COMPLETE trials of its kind
(speculative or not, as the worker does) before it that the replay did not stop; a stopped trial
saves the measurement windows of its remaining levels (their ``duration_s``; warmups and pauses
between windows, which it would also save, are not counted).

    .venv/bin/python -m benchmarks.early_stop_replay                      # the recorded H200 study
    .venv/bin/python -m benchmarks.early_stop_replay --storage sqlite:///nova.db --study NAME
"""

from __future__ import annotations

import argparse
from pathlib import Path

from nova_search.analysis.dominance import Finished, early_stop
from nova_search.results.load import load_results
from nova_search.spec.study import ConstraintSpec

REPO = Path(__file__).resolve().parents[1]
RECORDED = f"sqlite:///{REPO / 'benchmarks' / 'results' / 'h200-qwen3-8b' / 'study.db'}"


def replay(results, margin: float, min_levels: int) -> dict:
    # the stored spec (a dict) is read back through the spec model, so its constraints parse as a worker's
    spec = results.spec or {}
    conditions = [ConstraintSpec.model_validate(c).condition for c in spec.get("constraints") or []]
    launched = sorted((t for t in results.trials if t.levels), key=lambda t: t.number)
    finished: dict[bool, list[Finished]] = {True: [], False: []}
    stopped: list[tuple[int, int, str, float, bool]] = []
    for t in launched:
        stop = None
        kind = t.config is not None and t.config.speculative is not None
        for i in range(1, len(t.levels)):
            stop = early_stop(
                t.levels[:i], finished[kind], results.objectives, conditions, margin, min_levels
            )
            if stop is not None:
                saved = sum(lv.duration_s for lv in t.levels[i:])
                stopped.append((t.number, stop.concurrency, stop.reason, saved, t.key in results.front_keys))
                break
        if stop is None and t.feasible:
            finished[kind].append(Finished(t.number, t.levels))
    total = sum(t.timing.get("total_s", 0.0) for t in results.trials)
    windows = sum(t.timing.get("measure_s", 0.0) for t in results.trials)
    return {"stopped": stopped, "total_s": total, "windows_s": windows}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--storage", default=RECORDED)
    p.add_argument("--study", default="h200-qwen3-8b")
    args = p.parse_args()
    results = load_results(args.study, args.storage)
    front = sorted(results.front_keys)
    print(
        f"study {args.study}: {len(results.trials)} trials, {sum(1 for t in results.trials if t.levels)} "
        f"measured; objectives {', '.join(o.name for o in results.objectives)}; "
        f"front: trials {', '.join(front)}"
    )
    print(
        "\n| margin | min levels | trials stopped (after level) | on the final front | window s saved "
        "| of windows | of all GPU time |"
    )
    print("|---:|---:|---|---:|---:|---:|---:|")
    for margin in (0.02, 0.05, 0.10):
        for min_levels in (1, 2):
            r = replay(results, margin, min_levels)
            saved = sum(s[3] for s in r["stopped"])
            which = ", ".join(f"{n} ({c})" for n, c, *_ in r["stopped"]) or "none"
            on_front = sum(1 for s in r["stopped"] if s[4])
            print(
                f"| {margin:.0%} | {min_levels} | {which} | {on_front} | {saved:.0f} | "
                f"{saved / r['windows_s']:.0%} | {saved / r['total_s']:.1%} |"
            )


if __name__ == "__main__":
    main()
