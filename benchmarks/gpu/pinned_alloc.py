"""What a sleeping vLLM server's first sleep pays for: pinned host memory (issue 14).

vLLM's sleep mode (level 1) copies the weights into a new pinned CPU tensor on every sleep
(``CuMemAllocator.sleep``); PyTorch's host allocator caches the pinned blocks after the wake frees them,
so only a server's first sleep allocates, and it took 9-16 s on the H200 for 15.3 GiB of weights. This
times that allocation and the copy into it, in a fresh process each, with PyTorch's default host
allocator (cudaHostAlloc) and with ``PYTORCH_CUDA_ALLOC_CONF=pinned_use_cuda_host_register:True,
pinned_num_register_threads:N`` (malloc, pages touched by N threads, then cudaHostRegister).

    python3 -m benchmarks.gpu.pinned_alloc --gib 15.3      # on the GPU machine, the bundle on PYTHONPATH
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = """
import json, sys, time, torch
n = int(float(sys.argv[1]) * 2**30)
gpu = torch.empty(n, dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
t0 = time.perf_counter()
cpu = torch.empty(n, dtype=torch.uint8, device="cpu", pin_memory=True)
t1 = time.perf_counter()
cpu.copy_(gpu)
torch.cuda.synchronize()
t2 = time.perf_counter()
del cpu
cpu = torch.empty(n, dtype=torch.uint8, device="cpu", pin_memory=True)  # the next sleep: cached
t3 = time.perf_counter()
print(json.dumps({"alloc_s": t1 - t0, "copy_s": t2 - t1, "second_alloc_s": t3 - t2}))
"""


def run(gib: float, conf: str | None) -> dict:
    env = dict(os.environ)
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    if conf:
        env["PYTORCH_CUDA_ALLOC_CONF"] = conf
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(gib)], env=env, capture_output=True, text=True, check=True
    ).stdout
    return {"conf": conf or "default", "gib": gib, **json.loads(out.strip().splitlines()[-1])}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gib", type=float, default=15.3, help="pinned GiB (Qwen3-8B's weights: 15.3)")
    p.add_argument("--threads", default="8,16", help="pinned_num_register_threads values to try")
    args = p.parse_args()
    confs: list[str | None] = [None]
    confs += [
        f"pinned_use_cuda_host_register:True,pinned_num_register_threads:{t}" for t in args.threads.split(",")
    ]
    for conf in confs:
        row = run(args.gib, conf)
        print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}), flush=True)


if __name__ == "__main__":
    main()
