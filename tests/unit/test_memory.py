"""The memory estimate before boot (engine/memory.py) and the compatibility rule built on it."""

from __future__ import annotations

import json

import pytest

from nova_search.engine.memory import GIB, ModelShape, estimate
from nova_search.knobs import EngineConfig
from nova_search.search.rules import Facts, incompatibilities
from tests.support import REPO

QWEN3_8B = json.loads((REPO / "benchmarks" / "gpu" / "qwen3-8b-config.json").read_text())
H200 = 143771 * 1024 * 1024  # nvidia-smi's memory.total on the machine that ran the recorded study


def test_the_qwen3_8b_shape_matches_what_vllm_found_on_the_h200() -> None:
    shape = ModelShape.of(QWEN3_8B)
    assert shape is not None
    # vLLM 0.26.0 on the H200: "Model loading took 15.27 GiB"; "Available KV cache memory: 111.84 GiB",
    # "GPU KV cache size: 814,368 tokens" (111.84 GiB / 814,368 = 147,461 bytes, rounding of the GiB)
    assert shape.weight_bytes() / GIB == pytest.approx(15.27, abs=0.02)
    assert shape.kv_bytes_per_token() == 147_456
    assert shape.kv_bytes_per_token("fp8") == 73_728  # trials 1 and 4: 1,562,080 tokens in 107.26 GiB
    assert shape.kv_bytes_per_token(tp=2) == 73_728 and shape.weight_bytes(tp=2) == shape.weight_bytes() // 2
    assert shape.kv_bytes_per_token(tp=16) == shape.kv_bytes_per_token(tp=8)  # 8 KV heads: replicated past 8


def test_configurations_that_cannot_fit_are_named_with_the_numbers() -> None:
    shape = ModelShape.of(QWEN3_8B)
    assert shape is not None
    ok = estimate(shape, H200, utilization=0.85, kv_cache_dtype="auto", max_model_len=4096)
    assert ok.reason() is None
    no_weights = estimate(shape, H200, utilization=0.1, kv_cache_dtype="auto", max_model_len=4096)
    assert "cannot hold the weights (15.26 GiB a GPU" in (no_weights.reason() or "")
    long = estimate(shape, H200, utilization=0.15, kv_cache_dtype="auto", max_model_len=40960)
    why = long.reason() or ""
    assert "one 40960-token sequence needs 5.62 GiB" in why and "vLLM refuses to start" in why
    # the same at fp8 KV (half a token) fits
    assert estimate(shape, H200, utilization=0.15, kv_cache_dtype="fp8", max_model_len=40960).reason() is None


def test_the_rule_prunes_only_with_a_shape_a_gpu_memory_and_an_explicit_utilization() -> None:
    shape = ModelShape.of(QWEN3_8B)
    facts = Facts(device="cuda", model_max_len=40960, model_shape=shape, device_memory_bytes=H200)
    tight = EngineConfig(gpu_memory_utilization=0.15)
    (why,) = incompatibilities(tight, facts)
    assert why.startswith("memory_estimate: gpu_memory_utilization 0.15 of 140.4 GiB leaves at most")
    assert incompatibilities(EngineConfig(gpu_memory_utilization=0.15, max_model_len=4096), facts) == []
    assert incompatibilities(EngineConfig(), facts) == []  # vLLM's own default: not ours to judge
    assert incompatibilities(tight, Facts(device="cuda", model_max_len=40960, model_shape=shape)) == []
    assert incompatibilities(tight, Facts(device="cpu", model_max_len=40960)) == []


@pytest.mark.parametrize(
    "cfg",
    [
        {**QWEN3_8B, "quantization_config": {"quant_method": "fp8"}},  # smaller weights than the dtype says
        {**QWEN3_8B, "model_type": "deepseek_v3", "kv_lora_rank": 512},  # MLA: another KV cache
        {"model_type": "llama"},  # not a shape at all
    ],
)
def test_no_estimate_for_what_it_cannot_size(cfg: dict) -> None:
    assert ModelShape.of(cfg) is None


def test_a_mixture_of_experts_counts_every_expert() -> None:
    moe = {**QWEN3_8B, "num_experts": 128, "moe_intermediate_size": 768, "num_key_value_heads": 4}
    shape = ModelShape.of(moe)
    assert shape is not None and shape.experts == 128
    dense = ModelShape.of(QWEN3_8B)
    assert dense is not None and shape.params > 5 * dense.params
