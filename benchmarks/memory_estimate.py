"""Benchmark (prints figures): nova's memory estimate before boot against what vLLM found at boot, on
the recorded H200 study (benchmarks/results/h200-qwen3-8b: 12 trials, 9 booted on vLLM 0.26.0).

For every boot it reads vLLM's own lines from the committed server-log excerpt ("Model loading took",
"Available KV cache memory", "KV cache size: N tokens") and the trial's configuration from
study.json, and prints nova's figures beside them: weights a GPU, KV bytes a token, and the upper
bound on the KV cache that the memory rule prunes by (engine/memory.py). The GPU's memory is what
nvidia-smi reported on that machine (gpu.txt), as the worker reads it. Then it answers the question
that matters: would the rule have pruned any configuration that booted?

    .venv/bin/python -m benchmarks.memory_estimate
"""

from __future__ import annotations

import io
import json
import re
import tarfile
from pathlib import Path

from nova_search.engine.memory import GIB, ModelShape, estimate

REPO = Path(__file__).resolve().parents[1]

STUDY = REPO / "benchmarks" / "results" / "h200-qwen3-8b"
CONFIG = REPO / "benchmarks" / "gpu" / "qwen3-8b-config.json"
_BOOT = {
    "weights_gib": re.compile(r"Model loading took ([\d.]+) GiB"),
    "kv_gib": re.compile(r"Available KV cache memory: ([\d.]+) GiB"),
    "tokens": re.compile(r"KV cache size: ([\d,]+) tokens"),
    "utilization": re.compile(r"Desired GPU memory utilization is \(([\d.]+),"),
}


def boots(tgz: Path) -> dict[int, dict[str, float]]:
    """vLLM's own figures per trial number, from the study's server logs."""
    out: dict[int, dict[str, float]] = {}
    with tarfile.open(tgz) as tar:
        for member in tar.getmembers():
            m = re.search(r"trial-(\d+)/server\.log$", member.name)
            f = tar.extractfile(member) if m else None
            if m is None or f is None:
                continue
            text = io.TextIOWrapper(f, encoding="utf-8", errors="replace").read()
            found = {k: rx.search(text) for k, rx in _BOOT.items()}
            if all(found.values()):
                out[int(m.group(1))] = {k: float(v.group(1).replace(",", "")) for k, v in found.items()}  # type: ignore[union-attr]
    return out


def device_bytes(gpu_txt: Path) -> int:
    mib = re.search(r"(\d+) MiB", gpu_txt.read_text())
    if mib is None:
        raise SystemExit(f"{gpu_txt}: no memory.total in MiB")
    return int(mib.group(1)) * 1024 * 1024


def rows() -> list[dict[str, float | str | bool]]:
    shape = ModelShape.of(json.loads(CONFIG.read_text()))
    assert shape is not None
    total = device_bytes(STUDY / "gpu.txt")
    study = json.loads((STUDY / "study.json").read_text())
    seen = boots(STUDY / "server-logs.excerpt.tgz")  # every line but the access log's
    out = []
    for t in study["trials"]:
        vllm = seen.get(t["number"])
        cfg = t.get("config") or {}
        if vllm is None:
            continue
        est = estimate(
            shape,
            total,
            # the stock trial leaves it to vLLM: its log says what it used
            utilization=cfg.get("gpu_memory_utilization") or vllm["utilization"],
            kv_cache_dtype=cfg.get("kv_cache_dtype"),
            max_model_len=cfg.get("max_model_len") or 4096,
            tp=cfg.get("tensor_parallel_size") or 1,
        )
        out.append(
            {
                "trial": t["number"],
                "utilization": est.utilization,
                "kv_dtype": cfg.get("kv_cache_dtype") or "auto",
                "vllm_weights_gib": vllm["weights_gib"],
                "nova_weights_gib": est.weight_bytes / GIB,
                "vllm_kv_bytes_per_token": vllm["kv_gib"] * GIB / vllm["tokens"],
                "nova_kv_bytes_per_token": est.kv_bytes_per_token,
                "vllm_kv_gib": vllm["kv_gib"],
                "nova_kv_bound_gib": est.kv_bound_bytes / GIB,
                "pruned": est.reason() is not None,
            }
        )
    return out


def main() -> None:
    table = rows()
    print(
        "| trial | gpu_memory_utilization | KV dtype | weights GiB vLLM / nova "
        "| KV bytes a token vLLM / nova | KV GiB vLLM / nova's bound (bound − vLLM) | pruned |"
    )
    print("|---:|---:|---|---|---|---|---|")
    for r in table:
        print(
            f"| {r['trial']} | {r['utilization']:.3f} | {r['kv_dtype']} | {r['vllm_weights_gib']:.2f} / "
            f"{r['nova_weights_gib']:.2f} | {r['vllm_kv_bytes_per_token']:.0f} / "
            f"{r['nova_kv_bytes_per_token']} "
            f"| {r['vllm_kv_gib']:.2f} / {r['nova_kv_bound_gib']:.2f} "
            f"({r['nova_kv_bound_gib'] - r['vllm_kv_gib']:+.2f}) | {'yes' if r['pruned'] else 'no'} |"  # type: ignore[operator]
        )
    gaps = [r["nova_kv_bound_gib"] - r["vllm_kv_gib"] for r in table]  # type: ignore[operator]
    print(
        f"\n{len(table)} boots; the bound was above vLLM's KV memory by {min(gaps):.2f}-{max(gaps):.2f} GiB; "
        f"configurations that booted but the rule would prune: {sum(bool(r['pruned']) for r in table)}"
    )


if __name__ == "__main__":
    main()
