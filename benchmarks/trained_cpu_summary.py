"""Summarize the trained CPU study's two runs (benchmarks/trained_cpu_study.sh): per run, each
drafter's status, verified range and gain against tuned per level (with its interval and n); whether
the two runs agree on the accepted/rejected drafters, their verified ranges and the policy's choices;
and each drafter's acceptance as vLLM counted it over the run's windows (from the dump).

    .venv/bin/python -m benchmarks.trained_cpu_summary benchmarks/results/trained-cpu

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
            # policies written before a verdict could hold several verified ranges have none
            **({"verified_ranges": d["verified_ranges"]} if "verified_ranges" in d else {}),
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
    """Per speculative trial: the drafter, k, and vLLM's acceptance rate and mean acceptance length at
    each level (the median over the level's windows, as the dump stores it)."""
    out = {}
    for t in dump["trials"]:
        spec = (t.get("config") or {}).get("speculative")
        if not spec:
            continue
        out[t["key"]] = {
            "method": spec["method"],
            "k": spec["num_speculative_tokens"],
            "role": t["role"],
            "per_level": {
                str(lv["concurrency"]): {
                    "acceptance_rate": round(lv["spec_acceptance_rate"], 3),
                    "mean_acceptance_length": round(lv["spec_mean_acceptance_length"], 2),
                }
                for lv in t["levels"]
                if lv.get("spec_acceptance_rate") is not None
            },
        }
    return out


def equivalence(out: Path, name: str) -> dict:
    """Each speculative trial's greedy outputs against the tuned baseline's (the check the verdict
    runs): equivalent or not, with the exact matches out of the reference prompts."""
    from nova_search.api import load_results, tuned_baseline
    from nova_search.results.speculation import equivalence_of

    results = load_results(name, f"sqlite:///{out / 'study.db'}")
    base = tuned_baseline(results)
    checks = {}
    for t in results.trials:
        eq = equivalence_of(base, t) if base is not None and t.speculative else None
        if eq is not None:
            checks[t.key] = {"equivalent": eq.equivalent, "exact": f"{eq.exact_matches}/{eq.prompts}"}
    return checks


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
            "equivalence": equivalence(out, f"trained-cpu-run{run}"),
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
