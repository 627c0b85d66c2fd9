"""Benchmark summary (prints figures) of issue 14's H200 study
(studies/experiments/h200-qwen3-8b-confirm.yaml): where its GPU time went, what each confirmed trial's
ABBA pairs said against its leader, and its best throughput against the recorded study's best
non-speculative one.

Reads the study from its committed storage (``study.db`` in the results folder) through nova's read side:
the best non-speculative trial is ``results.select.tuned_baseline``, the GPU time ``results.cost.gpu_time``.
Writes summary.json beside it with ``--write``:

    .venv/bin/python -m benchmarks.gpu.confirm_summary benchmarks/results/h200-qwen3-8b-confirm --write
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from nova_search.analysis.noise import compare
from nova_search.results.cost import gpu_time
from nova_search.results.load import load_results
from nova_search.results.select import objective_of, tuned_baseline
from nova_search.results.trials import StudyResults, TrialResult

#: the recorded study's best non-speculative output_throughput@best (trial 8,
#: benchmarks/results/h200-qwen3-8b/study.json)
RECORDED_BEST_NON_SPEC = 7212.7304179075245
METRIC = "output_throughput"
#: the study's name in its storage (both sessions' folders, -confirm and -confirm-2, hold this name)
STUDY = "h200-qwen3-8b-confirm"


def against_leader(t: TrialResult) -> dict[str, dict]:
    """Per level (as a string, JSON's key): the trial's windows against its leader's, paired."""
    pairs: dict[str, dict] = {}
    for c, (lead, mine) in (t.paired.levels if t.paired else {}).items():
        a = [w[METRIC] for w in lead]
        b = [w[METRIC] for w in mine]
        if a and b:
            cmp = compare(a, b, higher_is_better=True)
            pairs[str(c)] = {
                "diff_pct": cmp.diff_pct,
                "ci_pct": [cmp.ci.low, cmp.ci.high] if cmp.ci else None,
                "verdict": cmp.verdict,
                "n": len(a),
            }
    return pairs


def summarize(results: StudyResults) -> dict:
    first = results.objectives[0]
    best = tuned_baseline(results)
    gpu = gpu_time(results).seconds()
    total = sum(gpu.values())
    rows = [
        {
            "number": t.number,
            "state": t.state,
            "value": objective_of(t, first) if t.values is not None else None,
            "timing": t.timing,
            "leader": t.paired.leader if t.paired else None,
            "pairs": t.paired.pairs if t.paired else None,
            "stopped": t.paired.stopped if t.paired else None,
            "against_leader": against_leader(t),
        }
        for t in results.trials
    ]
    best_value = objective_of(best, first) if best is not None else None
    return {
        "study": results.study_name,
        "budget": results.budget,
        "trials_done": len(results.trials),
        "gpu_time_s": gpu,
        "windows_share": gpu["windows"] / total if total else None,
        "best_non_speculative": {"trial": best.number, first.name: best_value} if best else None,
        "recorded_best_non_speculative": RECORDED_BEST_NON_SPEC,
        "vs_recorded_pct": (best_value / RECORDED_BEST_NON_SPEC - 1) * 100 if best_value else None,
        "trials": rows,
    }


def markdown(s: dict) -> str:
    g = s["gpu_time_s"]
    total = sum(g.values())
    out = [
        f"{s['study']}: {s['trials_done']} of {s['budget']} trials; GPU time {total:.0f} s: "
        + ", ".join(f"{k} {v:.0f} s ({v / total:.0%})" for k, v in g.items()),
        "",
        "| trial | tok/s | boot s | windows s | confirm s | switch s | total s | vs leader | pairs | "
        "64: diff % [95 % CI] | 128: diff % [95 % CI] |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|",
    ]
    for r in s["trials"]:
        t = r["timing"]
        cells = []
        for c in ("64", "128"):
            x = r["against_leader"].get(c)
            cells.append(
                f"{x['diff_pct']:+.1f} [{x['ci_pct'][0]:+.1f}, {x['ci_pct'][1]:+.1f}] {x['verdict']}"
                if x and x["ci_pct"]
                else "-"
            )
        lead = "alone" if r["pairs"] and r["leader"] is None else (f"#{r['leader']}" if r["pairs"] else "-")
        value = f"{r['value']:.0f}" if r["value"] is not None else "-"
        out.append(
            f"| {r['number']} | {value} | {t.get('boot_s', 0):.0f} | {t.get('measure_s', 0):.0f} | "
            f"{t.get('confirm_s', 0):.0f} | {t.get('switch_s', 0):.1f} | {t.get('total_s', 0):.0f} | "
            f"{lead} | "
            f"{r['pairs'] or '-'} {r['stopped'] or ''} | {cells[0]} | {cells[1]} |"
        )
    b = s["best_non_speculative"]
    if b:
        out += [
            "",
            f"best non-speculative: trial {b['trial']}, {list(b.values())[1]:.0f} tok/s; "
            "the recorded study's: "
            f"{s['recorded_best_non_speculative']:.0f} ({s['vs_recorded_pct']:+.1f} %)",
        ]
    return "\n".join(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("results", type=Path, help="the study's results folder (its storage: study.db)")
    p.add_argument("--study", default=STUDY, help=f"the study's name in its storage (default {STUDY})")
    p.add_argument("--write", action="store_true", help="write summary.json beside the study")
    args = p.parse_args()
    s = summarize(load_results(args.study, f"sqlite:///{args.results / 'study.db'}"))
    print(markdown(s))
    if args.write:
        (args.results / "summary.json").write_text(json.dumps(s, indent=2) + "\n")


if __name__ == "__main__":
    main()
