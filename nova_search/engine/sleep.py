"""vLLM's sleep mode, and what a parked server holds.

A server launched with ``--enable-sleep-mode`` and ``VLLM_SERVER_DEV_MODE=1`` (``SLEEP_FLAG``,
``SLEEP_ENV``) answers ``POST /sleep?level=1`` (its weights are copied to host memory, its KV cache
dropped, and the GPU memory given back but for a residue) and ``POST /wake_up``. On the H200 a sleep
took 0.34-0.38 s and a wake 0.43-0.52 s, after a first sleep of 10.6 s, and a woken server measured
as a freshly booted one (``benchmarks/results/sleep-ab-h200``). vLLM serves these endpoints without
the API key (dev mode); the server listens on loopback only.

The budget of a parked server reads the machine at run time: free memory per GPU (``nvidia-smi``)
and the host's available memory (``/proc/meminfo``); None where the machine cannot say.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Mapping

import httpx

from nova_search.errors import TrialFailure

SLEEP_FLAG = "--enable-sleep-mode"
SLEEP_ENV = {"VLLM_SERVER_DEV_MODE": "1"}
#: PyTorch's host allocator: pinned memory from malloc, its pages touched by several threads, then
#: cudaHostRegister, instead of one cudaHostAlloc. A sleep copies the weights into new pinned memory;
#: only a server's first sleep allocates it (the wake frees it into PyTorch's cache, which the next
#: sleep reuses). On the H200, 15.3 GiB took 6.8 s with the default, 1.9 s with 8 threads and 1.3 s
#: with 16 (benchmarks/gpu/pinned_alloc.py; the copy into it 0.30 s either way).
PINNED_CONF = "pinned_use_cuda_host_register:True,pinned_num_register_threads:{threads}"
ALLOC_CONF = "PYTORCH_CUDA_ALLOC_CONF"
#: seconds a sleep or a wake may take (the first sleep copies every weight to host memory)
SWITCH_TIMEOUT_S = 600.0


def _post(base_url: str, path: str, what: str) -> float:
    t0 = time.monotonic()
    try:
        r = httpx.post(base_url + path, timeout=SWITCH_TIMEOUT_S)
    except httpx.HTTPError as e:
        raise TrialFailure("crash", f"{what}: {type(e).__name__}: {e}") from None
    if r.status_code != 200:
        raise TrialFailure(
            "unsupported", f"{what}: HTTP {r.status_code} {r.text[:200]} (is the server in sleep mode?)"
        )
    return time.monotonic() - t0


def sleep(base_url: str, level: int = 1) -> float:
    """Put the server to sleep; the seconds it took."""
    return _post(base_url, f"/sleep?level={level}", "POST /sleep")


def wake_up(base_url: str) -> float:
    """Wake the server; the seconds it took."""
    return _post(base_url, "/wake_up", "POST /wake_up")


def gpu_free_bytes(gpus: tuple[int, ...]) -> dict[int, int] | None:
    """Free memory of each of ``gpus`` (every GPU when empty), from nvidia-smi; None without it."""
    argv = ["nvidia-smi", "--query-gpu=index,memory.free", "--format=csv,noheader,nounits"]
    if gpus:
        argv += ["-i", ",".join(map(str, gpus))]
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=True).stdout
        rows = [line.split(",") for line in out.strip().splitlines()]
        return {int(i): int(float(mib) * 1024 * 1024) for i, mib in rows}
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


def host_available_bytes() -> int | None:
    """The host's MemAvailable (bytes); None where /proc/meminfo does not say."""
    try:
        for line in open("/proc/meminfo", encoding="ascii"):
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def sleep_environment(env: Mapping[str, str], cores: int) -> dict[str, str]:
    """What a sleep-mode server adds to its environment ``env``: dev mode for the endpoints, and pinned
    memory registered by as many threads as ``cores``, rounded down to a power of two (PyTorch refuses
    any other count) and at most 16, unless ``env`` already says how to pin."""
    added = dict(SLEEP_ENV)
    conf = env.get(ALLOC_CONF, "")
    if "pinned_" not in conf:
        threads = 1 << (max(1, min(16, cores)).bit_length() - 1)
        pinned = PINNED_CONF.format(threads=threads)
        added[ALLOC_CONF] = f"{conf},{pinned}" if conf else pinned
    return added
