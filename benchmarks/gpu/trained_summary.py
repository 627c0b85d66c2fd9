"""Summarize issue 17's staged H200 study on the GPU pair (benchmarks/gpu/trained_study.sh): the tuned
baseline, each drafter's status, verified range and gain against tuned per level (interval and n),
vLLM's acceptance per drafter and level, the output-equivalence checks, the policy, and where the GPU
time went. The same fields as the CPU study's summary (benchmarks/trained_cpu_summary.py), for one run.

    .venv/bin/python -m benchmarks.gpu.trained_summary benchmarks/results/trained-h200
    .venv/bin/python -m benchmarks.gpu.trained_summary \
        benchmarks/results/trained-h200-drafters trained-h200-drafters

Reads DIR/policy.json (`nova-search policy --format json`), DIR/study.json (`nova-search dump`) and
DIR/study.db; writes DIR/summary.json and prints it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from benchmarks.trained_cpu_summary import acceptance, drafters, equivalence, ranges
from nova_search.analysis.gains import level_gain
from nova_search.api import load_results
from nova_search.results.cost import gpu_time
from nova_search.results.speculation import profile_of

STUDY = "trained-h200-speculative"


def against(results, base: str, other: str, metric: str = "output_throughput") -> dict:
    """``other`` against ``base`` per level, compared as the verdict compares a drafter with tuned
    (``gains.level_gain``: on their pairs where they have them, else on their own windows): the
    difference, its 95 % interval and the verdict."""
    trials = {t.key: t for t in results.trials}
    a, b = profile_of(trials[base]), profile_of(trials[other])
    out = {}
    for lv in sorted(a.levels):
        g = level_gain(a, b, lv, metric, higher_is_better=True, confidence=0.95)
        if g is not None:
            ci = [round(g.ci_low, 1), round(g.ci_high, 1)] if g.ci_low is not None else None
            out[str(lv)] = {"diff_pct": round(g.diff_pct, 1), "ci": ci, "verdict": g.verdict}
    return out


def summarize(out: Path, study: str = STUDY) -> dict:
    policy = json.loads((out / "policy.json").read_text())
    dump = json.loads((out / "study.json").read_text())
    results = load_results(study, f"sqlite:///{out / 'study.db'}")
    gpu = gpu_time(results).seconds()
    total = sum(gpu.values())
    return {
        "study": study,
        "trials": {
            state: sum(t["state"] == state for t in dump["trials"])
            for state in ("COMPLETE", "PRUNED", "FAIL")
        },
        "tuned": policy["tuned"],
        "tuned_vs_stock": policy["tuned_vs_stock"],
        "drafters": drafters(policy),
        "policy": ranges(policy),
        "acceptance": acceptance(dump),
        "equivalence": equivalence(out, study),
        # the A/A test: stock and the tuned baseline are one configuration here, measured a trial apart;
        # and each drafter against stock, the other measurement of that configuration
        "same_config_twice": against(results, policy["stock"], policy["tuned"]) if policy["stock"] else None,
        "against_stock": {
            t["key"]: against(results, policy["stock"], t["key"])
            for t in dump["trials"]
            if policy["stock"] and t["state"] == "COMPLETE" and (t["config"] or {}).get("speculative")
        },
        "gpu_time_s": gpu,
        "gpu_time_share": {k: round(v / total, 3) for k, v in gpu.items()} if total else None,
    }


def main() -> None:
    out = Path(sys.argv[1])
    summary = summarize(out, sys.argv[2] if len(sys.argv) > 2 else STUDY)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
