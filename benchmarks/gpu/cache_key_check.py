"""Do two trials' servers, launched by nova with different API keys, share vLLM's compile cache?
(vLLM 0.26 hashes VLLM_API_KEY into the cache's key; nova now hands the key over in a --config file.)

Launches two servers of one configuration (the Qwen3-8B shape, dummy weights, 0.40 of the GPU each)
at once through nova's own launch (``build_launch`` + ``Server``), each with a fresh key, on an empty
compile cache; waits until both logs name their torch.compile cache directory, prints both, and stops
them. Run on the H200 after the bundle's install (benchmarks/gpu/confirm_study.sh install, twice):

    python3 -m benchmarks.gpu.cache_key_check
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from nova_search.engine.command import build_launch, new_api_key
from nova_search.engine.server import Server, free_port
from nova_search.knobs import EngineConfig
from nova_search.spec import EngineSpec, ModelSpec

REPO = Path(__file__).resolve().parents[2]

CACHE_DIR = re.compile(r"torch_compile_cache/([0-9a-f]+)/")


def main() -> None:
    out = Path(os.environ.get("OUT", "/tmp/nova-out"))
    cache = Path("/tmp/nova-cache-check")
    engine = EngineSpec(
        python="python3",
        device="cuda",
        env={
            "PYTHONPATH": "/tmp/site",
            "VLLM_USE_FLASHINFER_SAMPLER": "0",
            "HF_HUB_OFFLINE": "1",
            "VLLM_NO_USAGE_STATS": "1",
            "VLLM_CACHE_ROOT": str(cache),
        },
        extra_args=["--load-format", "dummy"],
    )
    model = ModelSpec(path=str(REPO / ".gpu" / "model"), served_name="qwen3-8b")
    config = EngineConfig(
        max_model_len=4096, max_num_seqs=64, max_num_batched_tokens=8192, gpu_memory_utilization=0.4
    )
    servers = []
    for name in ("a", "b"):
        plan = build_launch(engine, model, config, port=free_port(), api_key=new_api_key())
        servers.append(Server(plan, out / f"cache-check-{name}.log", boot_timeout_s=300))
    t0 = time.monotonic()
    try:
        for s in servers:
            s.start()
        found: dict[int, str] = {}
        while len(found) < 2 and time.monotonic() - t0 < float(os.environ.get("LIMIT_S", "150")):
            for i, s in enumerate(servers):
                m = CACHE_DIR.search(s.log_path.read_text(errors="replace"))
                if m:
                    found[i] = m.group(1)
            time.sleep(1)
        print(f"after {time.monotonic() - t0:.0f} s: cache directories {found}")
        print("shared" if len(set(found.values())) == 1 and len(found) == 2 else "NOT shared")
    finally:
        for s in servers:
            s.stop()


if __name__ == "__main__":
    main()
