"""Random-weight drafters for the GPU studies' targets: the Qwen3-8B shape on the H200
(studies/experiments/h200-qwen3-8b-drafters.yaml), the Qwen3-30B-A3B and Gemma-4-31B shapes on the H100.

Writes one folder per drafter under OUT, each a ``config.json`` that vLLM 0.26.0 accepts for its
method with the target in TARGET, plus the target's tokenizer files:

- ``eagle3/``: an EAGLE-3 head, ``Eagle3Qwen3ForCausalLM`` (vllm/model_executor/models/qwen3_eagle3.py),
  or ``LlamaForCausalLMEagle3`` (llama_eagle3.py) with ``--eagle3-arch llama``: 1 decoder layer at the
  target's width, reading the target's residual stream at 3 layers;
- ``dflash/``: a DFlash block drafter, ``DFlashDraftModel`` (qwen3_dflash.py): 5 non-causal layers at
  the target's width, conditioned on 5 target layers, with a mask token for its parallel slots;
- ``draft/``: a small Qwen3 model (2 layers of 1024) with the target's vocabulary, for ``draft_model``.

For a Gemma-4 target (``Gemma4ForCausalLM``: benchmarks/gpu/gemma4_target.py) only ``dflash/`` is
written, in the layout of z-lab/gemma-4-31B-it-DFlash (``gemma4_dflash_config``): 5 layers of 64 heads
x 128 (8 KV heads) at the target's width, the first four sliding-window (2048) and causal, the last
full and non-causal (vLLM's qwen3_dflash.py:81-137), reading 6 target layers, mask token 4, block 16.

No weight files: vLLM builds a drafter with the target's load config unless ``draft_load_config`` is
given (vllm/config/speculative.py:212, model_loader/__init__.py:137), so ``--load-format dummy`` on the
server gives the drafters random weights too. The figures they give are boot, flags and timing, never
acceptance. Standard library only, so it runs on the H200 with the machine's ``python3``:

    python3 -m benchmarks.gpu.make_drafters                  # .gpu/model -> .gpu/drafters
    python3 -m benchmarks.gpu.make_drafters --target DIR --out DIR [--eagle3-arch llama]
    python3 -m benchmarks.gpu.make_drafters --target .gpu/gemma-4-31b --out .gpu/gemma-4-31b-drafters
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

#: the drafter folders, by the nova method each serves (``space.speculative.drafters``)
FOLDERS = {"eagle3": "eagle3", "dflash": "dflash", "draft_model": "draft"}

#: files of the target folder copied into every drafter folder (the tokenizer and what goes with it);
#: vLLM itself gives a drafter the target's tokenizer (vllm/config/speculative.py:834-838)
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
    "chat_template.jinja",
    "chat_template.json",
    "generation_config.json",
)

#: target fields every drafter config needs; head_dim may be left out (hidden_size / heads)
REQUIRED = (
    "hidden_size",
    "intermediate_size",
    "num_attention_heads",
    "num_key_value_heads",
    "num_hidden_layers",
    "vocab_size",
    "rms_norm_eps",
    "max_position_embeddings",
)

#: the Qwen3 DFlash drafters' mask token: the first id past Qwen3's 151669 real tokens
QWEN3_MASK_TOKEN_ID = 151669

#: substrings vLLM uses to guess a method from the drafter's path (vllm/config/speculative.py:876-885);
#: the draft_model folder must have none, or a guess could overrule method draft_model
METHOD_HINTS = ("eagle-", "eagle3", "dflash", "dspark")

#: z-lab/gemma-4-31B-it-DFlash's own shape (its config.json): what does not follow from the target
GEMMA4_DFLASH = {
    "layers": 5,
    "target_layers": 6,
    "heads": 64,
    "kv_heads": 8,
    "head_dim": 128,
    "sliding_window": 2048,
    "block_size": 16,
    "mask_token_id": 4,
    "rope_theta": 1_000_000,
}


def head_dim(target: dict[str, Any]) -> int:
    return int(target.get("head_dim") or target["hidden_size"] // target["num_attention_heads"])


def eagle3_aux_layer_ids(num_target_layers: int) -> list[int]:
    """vLLM's own default (interfaces.py:1449-1450): (2, L // 2, L - 3). An id is a position in the
    target's residual stream: 0 its embeddings, i the output of layer i - 1 (qwen2.py:415-422)."""
    return [2, num_target_layers // 2, num_target_layers - 3]


def dflash_target_layer_ids(num_target_layers: int, count: int) -> list[int]:
    """The DFlash rule for the target layers a drafter reads: ``count`` layers spread evenly from layer 1
    to layer L - 3 (for 36 layers and 5: 1, 9, 17, 25, 33). These are layer indices: vLLM reads the
    output of layer i, aux id i + 1 (v1/worker/gpu/spec_decode/eagle/eagle3_utils.py:42-46)."""
    if count < 1:
        raise ValueError("a DFlash drafter reads at least one target layer")
    if count == 1:
        return [num_target_layers // 2]
    start, end = 1, num_target_layers - 3
    if end - start + 1 < count:
        raise ValueError(f"{count} distinct target layers do not fit in layers {start}..{end}")
    return [int(round(start + i * (end - start) / (count - 1))) for i in range(count)]


def _common(target: dict[str, Any]) -> dict[str, Any]:
    """The fields every drafter takes from the target: attention shape, norms, RoPE, vocabulary."""
    out = {
        "hidden_act": target.get("hidden_act", "silu"),
        "attention_bias": bool(target.get("attention_bias", False)),
        "attention_dropout": 0.0,
        "head_dim": head_dim(target),
        "num_attention_heads": target["num_attention_heads"],
        "num_key_value_heads": target["num_key_value_heads"],
        "rms_norm_eps": target["rms_norm_eps"],
        "max_position_embeddings": target["max_position_embeddings"],
        "vocab_size": target["vocab_size"],
        "initializer_range": target.get("initializer_range", 0.02),
        "use_cache": True,
        "use_sliding_window": False,
        "sliding_window": None,
        "torch_dtype": target.get("torch_dtype", "bfloat16"),
        "dtype": target.get("dtype", target.get("torch_dtype", "bfloat16")),
    }
    for key in ("rope_theta", "rope_scaling", "rope_parameters", "bos_token_id", "eos_token_id"):
        if key in target:
            out[key] = target[key]
    return out


def eagle3_config(target: dict[str, Any], layers: int = 1, arch: str = "qwen3") -> dict[str, Any]:
    """An EAGLE-3 head at the target's width. vLLM shares the target's embeddings and lm_head with a
    drafter that loaded none (v1/worker/gpu/spec_decode/eagle/utils.py:12-16, 76-90), so the width must
    be the target's, and draft_vocab_size its vocabulary (identity draft-to-target map)."""
    aux = eagle3_aux_layer_ids(target["num_hidden_layers"])
    if arch == "qwen3":
        kind = {"architectures": ["Eagle3Qwen3ForCausalLM"], "model_type": "qwen3"}
    elif arch == "llama":
        kind = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "mlp_bias": False}
    else:
        raise ValueError(f"--eagle3-arch: qwen3 or llama, not {arch!r}")
    return {
        **kind,
        **_common(target),
        "hidden_size": target["hidden_size"],
        "intermediate_size": target["intermediate_size"],
        "num_hidden_layers": layers,
        "max_window_layers": layers,
        "tie_word_embeddings": False,
        "draft_vocab_size": target["vocab_size"],
        "target_hidden_size": target["hidden_size"],
        "eagle_aux_hidden_state_layer_ids": aux,
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": aux, "use_aux_hidden_state": True},
    }


def dflash_config(
    target: dict[str, Any], layers: int = 5, block_size: int = 16, mask_token_id: int | None = None
) -> dict[str, Any]:
    """A DFlash drafter (qwen3_dflash.py) at the target's width, reading as many target layers as it has
    layers. No layer_types and no use_swa: every layer is full, non-causal attention
    (qwen3_dflash.py:55-61, 96-132)."""
    vocab = target["vocab_size"]
    if mask_token_id is None:
        mask_token_id = QWEN3_MASK_TOKEN_ID if vocab > QWEN3_MASK_TOKEN_ID else vocab - 1
    if not 0 <= mask_token_id < vocab:
        raise ValueError(f"mask_token_id {mask_token_id} is outside the vocabulary (0..{vocab - 1})")
    return {
        "architectures": ["DFlashDraftModel"],
        "model_type": "qwen3",
        **_common(target),
        "hidden_size": target["hidden_size"],
        "intermediate_size": target["intermediate_size"],
        "num_hidden_layers": layers,
        "max_window_layers": layers,
        "tie_word_embeddings": False,
        "block_size": block_size,
        "num_target_layers": target["num_hidden_layers"],
        "dflash_config": {
            "mask_token_id": mask_token_id,
            "target_layer_ids": dflash_target_layer_ids(target["num_hidden_layers"], layers),
        },
    }


def text_config(target: dict[str, Any]) -> dict[str, Any]:
    """The decoder's fields: a multimodal config's ``text_config`` over its top level."""
    inner = target.get("text_config")
    return {**target, **inner} if isinstance(inner, dict) else target


def is_gemma4(target: dict[str, Any]) -> bool:
    """A Gemma-4 decoder, by the class vLLM builds (the folder's model_type may be a container's:
    benchmarks/gpu/gemma4_target.py)."""
    return any(str(a).startswith("Gemma4") for a in target.get("architectures") or ())


def gemma4_dflash_config(
    target: dict[str, Any],
    layers: int = GEMMA4_DFLASH["layers"],
    target_layers: int = GEMMA4_DFLASH["target_layers"],
    block_size: int = GEMMA4_DFLASH["block_size"],
    mask_token_id: int = GEMMA4_DFLASH["mask_token_id"],
) -> dict[str, Any]:
    """A DFlash drafter in z-lab/gemma-4-31B-it-DFlash's layout for a Gemma-4 target: ``layers`` Qwen3
    blocks (``DFlashDraftModel``, registry.py:608) at the target's width with an MLP twice as wide, the
    last one full attention, the others sliding-window (qwen3_dflash.py:81-137: with ``layer_types`` and
    no ``dflash_config.causal``, sliding layers are causal and the full one is not); ``target_layers``
    target layers by the DFlash rule (for 60 layers: 1, 12, 23, 35, 46, 57, the checkpoint's own; for 30:
    1, 6, 11, 17, 22, 27, z-lab/gemma-4-26B-A4B-it-DFlash's). A mix of sliding and full layers needs
    vLLM's V2 model runner, which vLLM 0.26.0 then turns on by itself (config/vllm.py:570-573)."""
    t = text_config(target)
    vocab = int(t["vocab_size"])
    if not 0 <= mask_token_id < vocab:
        raise ValueError(f"mask_token_id {mask_token_id} is outside the vocabulary (0..{vocab - 1})")
    if layers < 2:
        raise ValueError("a Gemma-4 DFlash drafter mixes sliding and full layers: at least 2 layers")
    g = GEMMA4_DFLASH
    hidden = int(t["hidden_size"])
    return {
        "architectures": ["DFlashDraftModel"],
        "model_type": "qwen3",
        "attention_bias": False,
        "attention_dropout": 0.0,
        "block_size": block_size,
        "bos_token_id": t.get("bos_token_id", 2),
        "eos_token_id": t.get("eos_token_id", 1),
        "pad_token_id": t.get("pad_token_id", 0),
        "dflash_config": {
            "mask_token_id": mask_token_id,
            "target_layer_ids": dflash_target_layer_ids(int(t["num_hidden_layers"]), target_layers),
        },
        "dtype": t.get("dtype", t.get("torch_dtype", "bfloat16")),
        "torch_dtype": t.get("torch_dtype", t.get("dtype", "bfloat16")),
        "final_logit_softcapping": t.get("final_logit_softcapping"),
        "head_dim": g["head_dim"],
        "hidden_act": "silu",
        "hidden_size": hidden,
        "initializer_range": t.get("initializer_range", 0.02),
        "intermediate_size": 2 * hidden,
        "layer_types": ["sliding_attention"] * (layers - 1) + ["full_attention"],
        "max_position_embeddings": t["max_position_embeddings"],
        "max_window_layers": layers,
        "num_attention_heads": g["heads"],
        "num_hidden_layers": layers,
        "num_key_value_heads": g["kv_heads"],
        "num_target_layers": int(t["num_hidden_layers"]),
        "rms_norm_eps": t["rms_norm_eps"],
        "rope_scaling": None,
        "rope_theta": g["rope_theta"],
        "sliding_window": g["sliding_window"],
        "tie_word_embeddings": True,
        "use_cache": True,
        "use_sliding_window": True,
        "vocab_size": vocab,
    }


def draft_config(
    target: dict[str, Any],
    layers: int = 2,
    hidden: int = 1024,
    intermediate: int = 3072,
    heads: int = 16,
    kv_heads: int = 8,
) -> dict[str, Any]:
    """A small Qwen3 model with the target's vocabulary (vLLM refuses a draft_model of another size:
    vllm/config/speculative.py:1275-1290) and its head_dim, so its KV cache pages match the target's."""
    return {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        **_common(target),
        "hidden_size": hidden,
        "intermediate_size": intermediate,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "num_hidden_layers": layers,
        "max_window_layers": layers,
        "tie_word_embeddings": True,
    }


def _check_target(target: dict[str, Any], where: Path) -> None:
    target = text_config(target)
    missing = [k for k in REQUIRED if not isinstance(target.get(k), int | float)]
    if missing:
        raise SystemExit(f"{where}: config.json lacks {', '.join(missing)}")


def write(
    target_dir: Path,
    out_dir: Path,
    *,
    eagle3_arch: str = "qwen3",
    eagle3_layers: int = 1,
    dflash_layers: int = 5,
    dflash_block_size: int = 16,
    dflash_mask_token_id: int | None = None,
    draft_layers: int = 2,
    draft_hidden: int = 1024,
    methods: tuple[str, ...] | None = None,
) -> dict[str, Path]:
    """Write the drafter folders (``methods``; by default all three, only dflash for a Gemma-4 target);
    returns {method: folder}."""
    config_path = target_dir / "config.json"
    target = json.loads(config_path.read_text())
    _check_target(target, config_path)
    gemma4 = is_gemma4(target)
    if methods is None:
        methods = ("dflash",) if gemma4 else tuple(FOLDERS)
    unknown = [m for m in methods if m not in FOLDERS]
    if unknown:
        raise ValueError(f"--methods: {unknown} is not one of {list(FOLDERS)}")
    if gemma4 and set(methods) - {"dflash"}:
        raise ValueError("a Gemma-4 target gets a DFlash drafter only (z-lab's layout); --methods dflash")
    builders = {
        "eagle3": lambda: eagle3_config(target, eagle3_layers, eagle3_arch),
        "dflash": lambda: (
            gemma4_dflash_config(
                target,
                dflash_layers,
                block_size=dflash_block_size,
                mask_token_id=GEMMA4_DFLASH["mask_token_id"]
                if dflash_mask_token_id is None
                else dflash_mask_token_id,
            )
            if gemma4
            else dflash_config(target, dflash_layers, dflash_block_size, dflash_mask_token_id)
        ),
        "draft_model": lambda: draft_config(
            target, draft_layers, draft_hidden, intermediate=3 * draft_hidden
        ),
    }
    configs = {method: builders[method]() for method in methods}
    written: dict[str, Path] = {}
    for method, config in configs.items():
        folder = out_dir / FOLDERS[method]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        for name in TOKENIZER_FILES:
            if (target_dir / name).is_file():
                shutil.copyfile(target_dir / name, folder / name)
        written[method] = folder
    draft = written.get("draft_model")
    hinted = [h for h in METHOD_HINTS if draft is not None and h in str(draft.resolve()).lower()]
    if hinted:
        print(f"warning: the draft_model folder's path contains {hinted}; vLLM may guess another method")
    return written


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--target", type=Path, default=Path(".gpu/model"), help="the target model folder")
    p.add_argument("--out", type=Path, default=Path(".gpu/drafters"), help="where the drafter folders go")
    p.add_argument("--eagle3-arch", choices=("qwen3", "llama"), default="qwen3")
    p.add_argument("--eagle3-layers", type=int, default=1)
    p.add_argument("--dflash-layers", type=int, default=5)
    p.add_argument("--dflash-block-size", type=int, default=16)
    p.add_argument("--dflash-mask-token-id", type=int, default=None)
    p.add_argument("--draft-layers", type=int, default=2)
    p.add_argument("--draft-hidden", type=int, default=1024)
    p.add_argument(
        "--methods",
        nargs="+",
        choices=tuple(FOLDERS),
        default=None,
        help="which drafters (default: all three; dflash only for a Gemma-4 target)",
    )
    return p


def _write_from(a: argparse.Namespace) -> dict[str, Path]:
    return write(
        a.target,
        a.out,
        eagle3_arch=a.eagle3_arch,
        eagle3_layers=a.eagle3_layers,
        dflash_layers=a.dflash_layers,
        dflash_block_size=a.dflash_block_size,
        dflash_mask_token_id=a.dflash_mask_token_id,
        draft_layers=a.draft_layers,
        draft_hidden=a.draft_hidden,
        methods=tuple(a.methods) if a.methods else None,
    )


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    try:
        written = _write_from(a)
    except ValueError as e:
        print(f"make_drafters: {e}", file=sys.stderr)
        return 2
    for method, folder in written.items():
        c = json.loads((folder / "config.json").read_text())
        extra = c.get("eagle_aux_hidden_state_layer_ids") or c.get("dflash_config", {}).get(
            "target_layer_ids"
        )
        print(
            f"{method:12s} {folder}: {c['architectures'][0]}, {c['num_hidden_layers']} layer(s) of "
            f"{c['hidden_size']}, vocab {c['vocab_size']}" + (f", target layers {extra}" if extra else "")
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
