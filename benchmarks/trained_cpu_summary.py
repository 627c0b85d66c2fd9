"""Summarize the trained CPU study's two runs (benchmarks/trained_cpu_study.sh): per run, each
drafter's status, verified range and gain against tuned per level (with its interval and n); whether
the two runs agree on the accepted/rejected drafters, their verified ranges and the policy's choices;
and each drafter's acceptance as vLLM counted it over the run's windows (from the dump).

    .venv/bin/python benchmarks/trained_cpu_summary.py benchmarks/results/trained-cpu

Writes OUT/summary.json and prints it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def drafters(policy: dict) -> dict:
    return {
        d["method"]: {
            "status": d["status"],
            "verified_range": d["verified_range"],
            "trials": d["trials"],
            "per_level": [
                {
                    k: g[k]
                    for k in (
                        "concurrency",
                        "diff_pct",
                        "ci_low",
                        "ci_high",
                        "verdict",
                        "n_tuned",
                        "n_candidate",
                    )
                }
                for g in d["per_level"]
            ],
            "reason": d["reason"],
        }
        for d in policy["drafters"]
    }


def ranges(policy: dict) -> list:
    return [[r["min_concurrency"], r["max_concurrency"], r["choice"], r["method"]] for r in policy["policy"]]


def acceptance(dump: dict) -> dict:
    """Per speculative trial: method, k, and accepted/drafted tokens over every measured window."""
    out = {}
    for t in dump.get("trials", []):
        params = t.get("params", {})
        method = params.get("spec_method")
        if not method or method == "none":
            continue
        drafted = accepted = 0.0
        for level in t.get("levels", []):
            drafted += level.get("spec_draft_tokens") or 0.0
            accepted += level.get("spec_accepted_tokens") or 0.0
        out[f"{t.get('study', '')}#{t['number']}"] = {
            "method": method,
            "k": params.get("num_speculative_tokens"),
            "state": t.get("state"),
            "acceptance": round(accepted / drafted, 4) if drafted else None,
        }
    return out


def main() -> None:
    out = Path(sys.argv[1])
    runs = {}
    for run in (1, 2):
        policy = json.loads((out / f"policy-run{run}.json").read_text())
        dump = json.loads((out / f"dump-run{run}.json").read_text())
        runs[f"run{run}"] = {
            "tuned": policy["tuned"],
            "tuned_vs_stock": policy["tuned_vs_stock"],
            "drafters": drafters(policy),
            "policy": ranges(policy),
            "acceptance": acceptance(dump),
        }
    one, two = runs["run1"], runs["run2"]
    same = {
        "status": {
            m: (one["drafters"][m]["status"], two["drafters"].get(m, {}).get("status"))
            for m in one["drafters"]
        },
        "verified_range": {
            m: (one["drafters"][m]["verified_range"], two["drafters"].get(m, {}).get("verified_range"))
            for m in one["drafters"]
        },
        "policy": (one["policy"], two["policy"]),
    }
    stable = {
        "status": all(a == b for a, b in same["status"].values()),
        "verified_range": all(a == b for a, b in same["verified_range"].values()),
        "policy": same["policy"][0] == same["policy"][1],
    }
    summary = {"stable": stable, "compared": same, **runs}
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
