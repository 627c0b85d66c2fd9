"""Check the Gemma-4 target and its DFlash drafter against the vLLM that will serve them, without a GPU
and in seconds: vLLM's own config classes read both folders as a server would at start-up
(``ModelConfig``, the tokenizer, ``SpeculativeConfig`` with a synthetic acceptance length), and the
script prints what a boot would decide from them: the model class and its per-layer attention shapes,
the tokenizer's size against ``vocab_size``, the DFlash method and its target layers (as vLLM's aux
ids), which drafter layers are causal, whether the V2 model runner is forced, and the KV cache one
``max_model_len`` sequence needs (vLLM refuses to start without it) at each KV dtype.

Run where vLLM 0.26.0 imports: on the GPU machine (``PYTHONPATH=/tmp/site``), or on the CPU with the
bundle's vllm package on the path and transformers 5.17 (the machine's), as for PLAN.md:

    python3 -m benchmarks.gpu.gemma4_check .gpu/gemma-4-31b .gpu/gemma-4-31b-drafters/dflash \\
        --max-model-len 16384 --stock-max-model-len 8192

``--modules`` also builds vLLM's two modules, Gemma4ForCausalLM and the DFlash drafter, on the meta
device (no memory) from the engine configuration the DFlash trial's flags give, and prints their
parameter counts and per-layer shapes. Without a GPU it first stands in for what vLLM's CPU-less CUDA
build lacks there (a CPU platform for argument parsing, Triton present, placeholder activation ops that
are never called): module construction reads the config only.

Exit 0 when every check passes, 1 when one fails (each printed with FAIL), 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

GIB = 1024**3


def _per_layer_kv_bytes(
    kinds: list[tuple[int, int, int | None]], tokens: int, in_flight: int, dtype_bytes: int
) -> int:
    """vLLM 0.26's need for one sequence of ``tokens`` (kv_cache_interface.py:258-263, 567-598): a
    full-attention layer holds every token, a sliding one min(window - 1 + in-flight tokens, tokens)
    plus one block; ``kinds`` is (kv_heads, head_dim, window or None) per layer, 16-token blocks."""
    total = 0
    for kv_heads, dim, window in kinds:
        per_token = 2 * kv_heads * dim * dtype_bytes
        if window is None:
            held = -(-tokens // 16) * 16
        else:
            held = (-(-min(window - 1 + in_flight, tokens) // 16) + 1) * 16
        total += held * per_token
    return total


def layer_kinds(cfg: dict[str, Any]) -> list[tuple[int, int, int | None]]:
    """(KV heads, head dim, sliding window) of each attention layer of a Gemma-4 decoder or a DFlash
    drafter, as vLLM's gemma4.py:566-587 and qwen3_dflash.py:81-137 build them."""
    out = []
    for kind in cfg["layer_types"]:
        if kind == "full_attention" and cfg.get("global_head_dim"):
            heads = cfg.get("num_global_key_value_heads") or cfg["num_key_value_heads"]
            out.append((heads, cfg["global_head_dim"], None))
        elif kind == "full_attention":
            out.append((cfg["num_key_value_heads"], cfg["head_dim"], None))
        else:
            out.append((cfg["num_key_value_heads"], cfg["head_dim"], cfg["sliding_window"]))
    return out


def kv_needs(
    target: dict[str, Any], drafter: dict[str, Any] | None, tokens: int, batched: int, dtype_bytes: int
) -> float:
    """GiB of KV cache one ``tokens``-long sequence needs, target and drafter, with async scheduling's
    two batches in flight (config/vllm.py:511-533)."""
    kinds = layer_kinds(target) + (layer_kinds(drafter) if drafter else [])
    return _per_layer_kv_bytes(kinds, tokens, 2 * batched, dtype_bytes) / GIB


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("target", type=Path)
    p.add_argument("drafter", type=Path)
    p.add_argument("--max-model-len", type=int, default=16384, help="tuned's (and the drafter trial's)")
    p.add_argument("--stock-max-model-len", type=int, default=8192, help="stock's (engine.defaults)")
    p.add_argument("--k", type=int, default=15, help="num_speculative_tokens")
    p.add_argument("--length", type=float, default=6.0, help="synthetic mean acceptance length")
    p.add_argument("--modules", action="store_true", help="also build both modules on the meta device")
    a = p.parse_args(argv)
    failures: list[str] = []

    def check(ok: bool, what: str) -> None:
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            failures.append(what)

    import transformers
    import vllm
    from vllm.config import ModelConfig, ParallelConfig, SpeculativeConfig
    from vllm.model_executor.models.qwen3_dflash import _dflash_layer_causal, dflash_has_any_non_causal
    from vllm.tokenizers import get_tokenizer
    from vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils import get_eagle3_aux_layers_from_config

    print(f"vllm {vllm.__version__}, transformers {transformers.__version__}")
    target = json.loads((a.target / "config.json").read_text())
    drafter = json.loads((a.drafter / "config.json").read_text())

    mc = ModelConfig(model=str(a.target), tokenizer=str(a.target), max_model_len=a.max_model_len)
    hf = mc.hf_text_config
    check(mc.architectures == ["Gemma4ForCausalLM"], f"model class {mc.architectures}")
    shapes = {
        k: getattr(hf, k, None)
        for k in ("head_dim", "global_head_dim", "num_key_value_heads", "num_global_key_value_heads")
    }
    check(
        shapes == {k: target[k] for k in shapes} and getattr(hf, "attention_k_eq_v", None) is True,
        f"per-layer attention shapes read as plain attributes {shapes}",
    )
    check(len(hf.layer_types) == mc.get_total_num_hidden_layers(), f"{len(hf.layer_types)} layer types")
    tok = get_tokenizer(str(a.target))
    check(len(tok) == mc.get_vocab_size(), f"tokenizer {len(tok)} ids, vocab_size {mc.get_vocab_size()}")
    top = mc.get_vocab_size() - 1
    check(bool(tok.decode([top])), f"id {top} decodes to {tok.decode([top])!r}")

    sc = SpeculativeConfig(
        method="dflash",
        model=str(a.drafter),
        num_speculative_tokens=a.k,
        rejection_sample_method="synthetic",
        synthetic_acceptance_length=a.length,
        target_model_config=mc,
        target_parallel_config=ParallelConfig(),
    )
    dh = sc.draft_model_config.hf_config
    rates = sc.synthetic_acceptance_rates or []
    check(
        abs(1 + sum(rates) - a.length) < 1e-6,
        f"synthetic acceptance length {a.length} at k={a.k}: {len(rates)} per-position rates",
    )
    check(sc.method == "dflash" and sc.parallel_drafting, f"method {sc.method}, parallel drafting")
    check(
        sc.draft_model_config.architectures == ["DFlashDraftModel"],
        f"drafter class {sc.draft_model_config.architectures}",
    )
    aux = get_eagle3_aux_layers_from_config(sc)
    n = mc.get_total_num_hidden_layers()
    check(aux is not None and all(0 < i <= n for i in aux), f"aux hidden-state ids {aux} of {n} layers")
    causal = [_dflash_layer_causal(dh, i) for i in range(dh.num_hidden_layers)]
    check(causal == [t == "sliding_attention" for t in dh.layer_types], f"drafter layers causal: {causal}")
    check(dflash_has_any_non_causal(dh), "a non-causal drafter layer (needs a non-causal backend)")
    sliding = sum(t == "sliding_attention" for t in (getattr(dh, "layer_types", None) or []))
    check(0 < sliding < dh.num_hidden_layers, "mixed sliding/full drafter: vLLM 0.26 forces the V2 runner")

    for label, tokens, batched, dtype_bytes, with_drafter in (
        ("stock, bf16 KV", a.stock_max_model_len, 8192, 2, False),
        ("tuned, fp8 KV", a.max_model_len, 16384, 1, False),
        ("DFlash, fp8 KV", a.max_model_len, 16384, 1, True),
    ):
        need = kv_needs(target, drafter if with_drafter else None, tokens, batched, dtype_bytes)
        print(f"info {label}: one {tokens}-token sequence needs {need:.2f} GiB of KV cache")
    if a.modules:
        build_on_meta(a, target, check)
    return 1 if failures else 0


def _stand_in_for_a_gpu() -> None:
    """What module construction needs of vLLM's CUDA build on a machine without a GPU (module docstring)."""
    import torch
    import vllm.config.vllm as vllm_config_module
    import vllm.platforms as platforms
    from vllm.platforms.cpu import CpuPlatform

    platforms._current_platform = CpuPlatform()  # type: ignore[attr-defined]
    vllm_config_module.HAS_TRITON = True  # type: ignore[attr-defined]
    lib = torch.library.Library("_C", "FRAGMENT")
    for op in ("gelu_tanh_and_mul", "silu_and_mul"):
        if not hasattr(torch.ops._C, op):
            lib.define(f"{op}(Tensor(a!) out, Tensor input) -> ()")
    globals()["_LIB"] = lib  # the definitions live as long as the library object


def build_on_meta(a: argparse.Namespace, target: dict[str, Any], check: Any) -> None:
    """Build the target and the drafter as a DFlash trial's server would, on the meta device."""
    import socket

    import torch

    if not torch.cuda.is_available():
        _stand_in_for_a_gpu()
    from vllm.config import set_current_vllm_config
    from vllm.distributed import init_distributed_environment, initialize_model_parallel
    from vllm.engine.arg_utils import EngineArgs
    from vllm.model_executor.models.gemma4 import Gemma4ForCausalLM
    from vllm.model_executor.models.qwen3_dflash import DFlashQwen3ForCausalLM

    spec = {
        "method": "dflash",
        "model": str(a.drafter),
        "num_speculative_tokens": a.k,
        "rejection_sample_method": "synthetic",
        "synthetic_acceptance_length": a.length,
    }
    args = EngineArgs(
        model=str(a.target),
        load_format="dummy",
        attention_backend="TRITON_ATTN",
        kv_cache_dtype="fp8_e4m3",
        max_model_len=a.max_model_len,
        max_num_seqs=128,
        max_num_batched_tokens=16384,
        speculative_config=spec,
    )
    vc = args.create_engine_config()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with set_current_vllm_config(vc):
        init_distributed_environment(1, 0, f"tcp://127.0.0.1:{port}", 0, "gloo")
        initialize_model_parallel(1, 1)
    with set_current_vllm_config(vc), torch.device("meta"):
        model = Gemma4ForCausalLM(vllm_config=vc)
        drafter = DFlashQwen3ForCausalLM(vllm_config=vc)
    shapes = {n: tuple(p.shape) for n, p in model.named_parameters()}
    n = sum(p.numel() for p in model.parameters())
    print(f"info target: {n:,} parameters, {2 * n / GIB:.2f} GiB in bf16")
    full = target["layer_types"].index("full_attention")
    for i in (0, full):
        for name in ("self_attn.qkv_proj.weight", "self_attn.o_proj.weight", "mlp.gate_up_proj.weight"):
            print(f"info   layers.{i}.{name} {shapes[f'model.layers.{i}.{name}']}")
    q, kv = target["num_attention_heads"], target["num_global_key_value_heads"]
    dim = target["global_head_dim"]
    check(
        shapes[f"model.layers.{full}.self_attn.qkv_proj.weight"][0] == (q + 2 * kv) * dim,
        f"full-attention layer {full}: {q} heads and {kv} KV heads of {dim}",
    )
    own = {"model.embed_tokens.weight", "lm_head.weight"}  # shared with the target (dflash/utils.py)
    d = sum(p.numel() for name, p in drafter.named_parameters() if name not in own)
    print(f"info drafter: {d:,} parameters of its own, {2 * d / GIB:.2f} GiB in bf16")
    fc = dict(drafter.named_parameters())["model.fc.weight"].shape
    print(
        f"info   model.fc.weight {tuple(fc)}; layers (window, causal): "
        f"{[(x.self_attn.sliding_window, x.self_attn.causal) for x in drafter.model.layers]}"
    )


if __name__ == "__main__":
    sys.exit(main())
