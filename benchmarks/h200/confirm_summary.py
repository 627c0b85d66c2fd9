"""Benchmark summary (prints figures) of issue 14's H200 study (studies/h200-qwen3-8b-confirm.yaml): where
its GPU time went, what each confirmed trial's ABBA pairs said against its leader, and its best
throughput against the recorded study's best non-speculative one.

Reads a study exported by `nova-search dump` (JSON); writes summary.json beside it with ``--write``:

    .venv/bin/python benchmarks/h200/confirm_summary.py \
        benchmarks/results/h200-qwen3-8b-confirm/study.json --write
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from nova_search.analysis.noise import compare  # noqa: E402

#: the recorded study's best non-speculative output_throughput@best (trial 8,
#: benchmarks/results/h200-qwen3-8b/study.json)
RECORDED_BEST_NON_SPEC = 7212.7304179075245
METRIC = "output_throughput"


def summarize(study: dict) -> dict:
    trials = study["trials"]
    key = study["objectives"][0]
    done = [t for t in trials if t["state"] == "COMPLETE"]
    plain = [t for t in done if not (t["config"] or {}).get("speculative")]
    best = max(plain, key=lambda t: t["values"][key]) if plain else None
    gpu = study["gpu_time_s"]
    total = sum(gpu.values())
    rows = []
    for t in trials:
        p = t.get("paired") or {}
        pairs = {}
        for c, sides in (p.get("levels") or {}).items():
            a = [w[METRIC] for w in sides["leader"]]
            b = [w[METRIC] for w in sides["trial"]]
            if a and b:
                cmp = compare(a, b, higher_is_better=True)
                pairs[c] = {
                    "diff_pct": cmp.diff_pct,
                    "ci_pct": [cmp.ci.low, cmp.ci.high] if cmp.ci else None,
                    "verdict": cmp.verdict,
                    "n": len(a),
                }
        rows.append(
            {
                "number": t["number"],
                "state": t["state"],
                "value": (t["values"] or {}).get(key),
                "timing": t["timing"],
                "leader": p.get("leader"),
                "pairs": p.get("pairs"),
                "stopped": p.get("stopped"),
                "against_leader": pairs,
            }
        )
    return {
        "study": study["study"],
        "budget": study["budget"],
        "trials_done": len(trials),
        "gpu_time_s": gpu,
        "windows_share": gpu["windows"] / total if total else None,
        "best_non_speculative": {"trial": best["number"], key: best["values"][key]} if best else None,
        "recorded_best_non_speculative": RECORDED_BEST_NON_SPEC,
        "vs_recorded_pct": (best["values"][key] / RECORDED_BEST_NON_SPEC - 1) * 100 if best else None,
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
    p = argparse.ArgumentParser()
    p.add_argument("study_json")
    p.add_argument("--write", action="store_true", help="write summary.json beside the study")
    args = p.parse_args()
    s = summarize(json.loads(Path(args.study_json).read_text()))
    print(markdown(s))
    if args.write:
        Path(args.study_json).with_name("summary.json").write_text(json.dumps(s, indent=2) + "\n")


if __name__ == "__main__":
    main()
