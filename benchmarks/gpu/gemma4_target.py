"""The Gemma-4-31B-shaped target folder for the H100 study (studies/experiments/h100-gemma-4-31b-dflash.yaml):
``benchmarks/gpu/gemma-4-31b-config.json`` beside a tokenizer whose vocabulary is the config's, served
with ``--load-format dummy`` (random weights, the real shapes).

The config is google/gemma-4-31B-it's decoder (its ``text_config``) as the text-only class vLLM 0.26.0
registers, ``Gemma4ForCausalLM`` (vllm/model_executor/models/registry.py:110): the checkpoint's
``Gemma4ForConditionalGeneration`` would also build the vision tower and need an image processor and
``--limit-mm-per-prompt``; text requests run the same decoder either way. Two things are written
differently in the folder than in the committed file, both for the machine's software:

- ``model_type``: ``gemma3_text``, not ``gemma4_text`` (unless ``--keep-model-type``). transformers 5.17
  (the GPU machine's) moves a Gemma-4 config's ``global_head_dim`` and ``num_global_key_value_heads``
  into ``per_layer_config`` and then raises AmbiguousGlobalPerLayerAttributeError on ``config.head_dim``,
  which vLLM 0.26.0 reads (config/model.py:573 -> model_arch_config_convertor; gemma4.py:566-587 reads
  ``global_head_dim`` as a plain attribute). A Gemma3TextConfig keeps every field of the file as a
  plain attribute, and vLLM picks the model class from ``architectures``, so the folder builds the
  same Gemma4ForCausalLM with the real per-layer shapes (checked with vLLM 0.26.0's ModelConfig and
  transformers 5.17 on the CPU: benchmarks/results/h100-gemma-4-31b-dflash/PLAN.md).
- the tokenizer: the bundle's (``.gpu/model``: a byte-level BPE padded to 151,936 ids) padded on to
  the config's 262,144 ids with unreachable filler tokens, so every id the random-weight model emits
  decodes and ``len(tokenizer)`` equals ``vocab_size``; prompts of random ids stay inside it too.

``--layers N`` writes the labelled fallback: the same shape with N decoder layers (a multiple of 6:
five sliding-window layers, then one full-attention layer, as the real 60).

Standard library only, so it runs on the machine with its ``python3``:

    python3 -m benchmarks.gpu.gemma4_target --tokenizer .gpu/model --out .gpu/gemma-4-31b [--layers 30]
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import string
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CONFIG = Path(__file__).resolve().parent / "gemma-4-31b-config.json"

#: files of the tokenizer folder copied as they are (tokenizer.json is padded, config.json replaced)
COPIED = (
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "chat_template.jinja",
    "chat_template.json",
    "generation_config.json",
)

#: Gemma-4's layer pattern: five sliding-window layers, then one full-attention layer
PATTERN = ["sliding_attention"] * 5 + ["full_attention"]

#: the config class vLLM 0.26.0 can read a Gemma-4 decoder through on transformers 5.17 (module docstring)
CONTAINER_MODEL_TYPE = "gemma3_text"


def with_layers(config: dict[str, Any], layers: int) -> dict[str, Any]:
    """The same shape with ``layers`` decoder layers (a multiple of the 6-layer pattern)."""
    if layers < len(PATTERN) or layers % len(PATTERN):
        raise ValueError(f"--layers: a multiple of {len(PATTERN)} (5 sliding + 1 full), not {layers}")
    return {**config, "num_hidden_layers": layers, "layer_types": PATTERN * (layers // len(PATTERN))}


def target_config(
    config: dict[str, Any], *, layers: int | None = None, keep_model_type: bool = False
) -> dict[str, Any]:
    """The folder's config.json: the committed file, with fewer layers when asked, through the
    container class unless ``keep_model_type`` (module docstring)."""
    out = with_layers(config, layers) if layers else dict(config)
    if len(out["layer_types"]) != out["num_hidden_layers"]:
        raise ValueError(
            f"layer_types has {len(out['layer_types'])} entries for {out['num_hidden_layers']} layers"
        )
    if not keep_model_type:
        out["model_type"] = CONTAINER_MODEL_TYPE
    return out


def _fillers(taken: set[str]) -> Iterator[str]:
    """Filler token names: lowercase ASCII words of 5 letters and more, none already a token (byte-level
    BPE maps ASCII letters to themselves, so each decodes to its own text)."""
    for k in itertools.count(5):
        for letters in itertools.product(string.ascii_lowercase, repeat=k):
            name = "".join(letters)
            if name not in taken:
                yield name


def pad_tokenizer(tokenizer: dict[str, Any], vocab_size: int) -> dict[str, Any]:
    """A tokenizer.json whose model vocabulary holds every id below ``vocab_size``: the ids it lacks
    get unreachable filler tokens (no merge makes them), the rest stays as it was."""
    model = tokenizer.get("model") or {}
    vocab = model.get("vocab")
    if model.get("type") != "BPE" or not isinstance(vocab, dict):
        raise ValueError("tokenizer.json: a BPE model with a vocabulary mapping is needed")
    ids = set(vocab.values()) | {t["id"] for t in tokenizer.get("added_tokens", [])}
    if max(ids) >= vocab_size:
        raise ValueError(f"tokenizer.json has id {max(ids)}, past the config's vocab_size {vocab_size}")
    missing = [i for i in range(vocab_size) if i not in ids]
    names = _fillers(set(vocab))
    padded = dict(vocab)
    for i in missing:
        padded[next(names)] = i
    return {**tokenizer, "model": {**model, "vocab": padded}}


def write(
    tokenizer_dir: Path,
    out_dir: Path,
    *,
    config_path: Path = CONFIG,
    layers: int | None = None,
    keep_model_type: bool = False,
) -> dict[str, Any]:
    """Write the target folder; returns its config."""
    config = target_config(
        json.loads(config_path.read_text()), layers=layers, keep_model_type=keep_model_type
    )
    tokenizer = json.loads((tokenizer_dir / "tokenizer.json").read_text())
    padded = pad_tokenizer(tokenizer, int(config["vocab_size"]))
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "tokenizer.json").write_text(json.dumps(padded, ensure_ascii=False))
    for name in COPIED:
        if (tokenizer_dir / name).is_file():
            shutil.copyfile(tokenizer_dir / name, out_dir / name)
    (out_dir / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return config


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--tokenizer", type=Path, default=Path(".gpu/model"), help="folder with tokenizer.json")
    p.add_argument("--out", type=Path, default=Path(".gpu/gemma-4-31b"), help="the target folder to write")
    p.add_argument("--config", type=Path, default=CONFIG, help="the Gemma-4 config.json")
    p.add_argument(
        "--layers", type=int, default=None, help="fewer decoder layers (a multiple of 6): the fallback"
    )
    p.add_argument(
        "--keep-model-type", action="store_true", help="write gemma4_text, not the gemma3_text container"
    )
    return p


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    try:
        c = write(
            a.tokenizer, a.out, config_path=a.config, layers=a.layers, keep_model_type=a.keep_model_type
        )
    except (OSError, ValueError, KeyError) as e:
        print(f"gemma4_target: {e}", file=sys.stderr)
        return 2
    print(
        f"{a.out}: {c['architectures'][0]} ({c['model_type']}), {c['num_hidden_layers']} layers of "
        f"{c['hidden_size']}, vocab {c['vocab_size']} (tokenizer padded to it)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
