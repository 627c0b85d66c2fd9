"""Build the tiny local model the demo serves: a Llama-shaped config.json and a byte-level BPE tokenizer
trained on local text. vLLM serves it with ``--load-format dummy`` (random weights), so its timings
depend only on the shapes. Optionally an EAGLE-3 drafter folder of matching shape (``--eagle3``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

VOCAB = 2048
SPECIALS = ["<unk>", "<s>", "</s>"]  # ids 0, 1 (bos), 2 (eos)
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}</s>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)

MODEL_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "vocab_size": VOCAB,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "hidden_act": "silu",
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "bos_token_id": 1,
    "eos_token_id": 2,
}

EAGLE3_CONFIG = {
    **MODEL_CONFIG,
    "architectures": ["LlamaForCausalLMEagle3"],
    "num_hidden_layers": 1,
    "draft_vocab_size": VOCAB,
    # a 2-layer target exposes two aux hidden states; the default expects three
    "eagle_config": {"eagle_aux_hidden_state_layer_ids": [0, 1]},
}


def _training_text() -> list[str]:
    """Local text only (no hub): the system's licence texts, else Python's own sources."""
    roots = [Path("/usr/share/common-licenses"), Path(json.__file__).parent.parent]
    for root in roots:
        files = [str(p) for p in sorted(root.glob("*")) if p.is_file()][:200]
        if files:
            return files
    raise RuntimeError("no local text found to train the tokenizer on")


def build_tokenizer(out: Path, files: list[str] | None = None, vocab: int = VOCAB) -> None:
    """A byte-level BPE tokenizer of ``vocab`` ids (the 3 specials first) trained on ``files`` (default:
    local licence texts), with its config files, written to ``out``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train(files or _training_text(), trainer)
    tok.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "bos_token": "<s>",
                "eos_token": "</s>",
                "unk_token": "<unk>",
                "pad_token": "</s>",
                "model_max_length": 4096,
                "add_bos_token": False,
                "chat_template": CHAT_TEMPLATE,
            },
            indent=2,
        )
    )
    (out / "special_tokens_map.json").write_text(
        json.dumps({"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}, indent=2)
    )


def build_tiny_model(out_dir: str | Path, eagle3: bool = True) -> Path:
    """Write the tiny model (and, beside it in ``eagle3/``, an EAGLE-3 drafter). Idempotent."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    build_tokenizer(out)
    (out / "config.json").write_text(json.dumps(MODEL_CONFIG, indent=2))
    (out / "generation_config.json").write_text(
        json.dumps({"bos_token_id": 1, "eos_token_id": 2, "do_sample": False}, indent=2)
    )
    if eagle3:
        drafter = out / "eagle3"
        drafter.mkdir(exist_ok=True)
        for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
            (drafter / name).write_bytes((out / name).read_bytes())
        (drafter / "config.json").write_text(json.dumps(EAGLE3_CONFIG, indent=2))
    return out


if __name__ == "__main__":  # pragma: no cover
    print(build_tiny_model(sys.argv[1]))
