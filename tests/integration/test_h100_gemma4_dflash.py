"""The Gemma-4-31B study's preparation for the H100 (issue 50): the committed decoder config
(benchmarks/gpu/gemma-4-31b-config.json), the target folder written from it (gemma4_target.py), the
DFlash drafter in z-lab's layout (make_drafters.py), the KV arithmetic of gemma4_check.py, and the study
(studies/experiments/h100-gemma-4-31b-dflash.yaml): what each of its trials launches, checked against
nova's rules. vLLM's own reading of the folders (gemma4_check.py against vLLM 0.26.0) needs that vLLM,
which the tests do not have; PLAN.md beside the results records that run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import optuna
import pytest

from nova_search.engine.command import build_launch
from nova_search.engine.memory import ModelShape
from nova_search.search.configs import sample, stock_config, tuned_config, with_graph_sizes
from nova_search.search.rules import Facts, incompatibilities, model_heads
from nova_search.spec import load_spec
from tests.support import REPO
from tests.support.scripts import benchmark_script

GPU = REPO / "benchmarks" / "gpu"
CONFIG = GPU / "gemma-4-31b-config.json"
STUDY = REPO / "studies" / "experiments" / "h100-gemma-4-31b-dflash.yaml"
WRAPPER = GPU / "gemma4_dflash_study.sh"
target_script = benchmark_script("gpu/gemma4_target.py")
drafters_script = benchmark_script("gpu/make_drafters.py")
check_script = benchmark_script("gpu/gemma4_check.py")

#: a byte-level BPE tokenizer.json in miniature: 6 tokens and one special one
TOKENIZER = {
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "c": 3, "d": 4, "<|end|>": 5}, "merges": []},
    "added_tokens": [{"id": 5, "content": "<|end|>", "special": True}],
    "decoder": {"type": "ByteLevel"},
}


def _config() -> dict[str, Any]:
    return json.loads(CONFIG.read_text())


def _run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    """A script stand-alone, as on the GPU machine: the standard library only (-I -S)."""
    argv = [sys.executable, "-I", "-S", str(GPU / script), *args]
    return subprocess.run(argv, capture_output=True, text=True, check=False)


@pytest.fixture
def tokenizer_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "tokenizer.json").write_text(json.dumps(TOKENIZER))
    (folder / "tokenizer_config.json").write_text('{"tokenizer_class": "PreTrainedTokenizerFast"}')
    (folder / "config.json").write_text('{"model_type": "qwen3"}')  # the bundle's, replaced
    return folder


@pytest.fixture
def target(tokenizer_dir: Path, tmp_path: Path) -> Path:
    out = tmp_path / "gemma-4-31b"
    done = _run("gemma4_target.py", "--tokenizer", str(tokenizer_dir), "--out", str(out))
    assert done.returncode == 0, done.stderr
    return out


def _params(c: dict[str, Any]) -> int:
    """What vLLM 0.26's Gemma4ForCausalLM allocates (gemma4.py:368-700): fused QKV (V too on the
    k_eq_v layers), O, the gated MLP, four norms a layer and two head norms, tied embeddings, the final
    norm."""
    h, total = c["hidden_size"], c["vocab_size"] * c["hidden_size"] + c["hidden_size"]
    for kind in c["layer_types"]:
        full = kind == "full_attention"
        dim = c["global_head_dim"] if full else c["head_dim"]
        kv = c["num_global_key_value_heads"] if full else c["num_key_value_heads"]
        q = c["num_attention_heads"] * dim
        total += h * (q + 2 * kv * dim) + q * h + 3 * h * c["intermediate_size"] + 4 * h + 2 * dim
    return total


def test_the_committed_config_is_the_model_cards_decoder_as_the_text_only_class() -> None:
    c = _config()
    assert c["architectures"] == ["Gemma4ForCausalLM"] and c["model_type"] == "gemma4_text"
    assert (c["num_hidden_layers"], c["hidden_size"], c["intermediate_size"]) == (60, 5376, 21504)
    assert c["layer_types"] == (["sliding_attention"] * 5 + ["full_attention"]) * 10
    assert (c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]) == (32, 16, 256)
    assert (c["num_global_key_value_heads"], c["global_head_dim"], c["attention_k_eq_v"]) == (4, 512, True)
    assert c["sliding_window"] == 1024 and c["vocab_size"] == 262144 and c["tie_word_embeddings"]
    assert c["rope_parameters"]["full_attention"]["rope_type"] == "proportional"
    assert not c["enable_moe_block"] and c["hidden_size_per_layer_input"] == 0
    # 30.7B parameters (the card); vLLM 0.26 built the same count on the meta device (PLAN.md)
    assert _params(c) == 30_807_445_760


def test_the_target_folder_pads_the_tokenizer_to_the_config_vocabulary(
    target: Path, tokenizer_dir: Path
) -> None:
    config = json.loads((target / "config.json").read_text())
    assert config["model_type"] == "gemma3_text"  # the container vLLM 0.26 can read on transformers 5.17
    assert {k: v for k, v in config.items() if k != "model_type"} == {
        k: v for k, v in _config().items() if k != "model_type"
    }
    tok = json.loads((target / "tokenizer.json").read_text())
    vocab = tok["model"]["vocab"]
    assert sorted(vocab.values()) == list(range(config["vocab_size"]))  # every id once
    assert all(vocab[t] == i for t, i in TOKENIZER["model"]["vocab"].items())  # the real tokens kept
    fillers = [t for t in vocab if t not in TOKENIZER["model"]["vocab"]]
    assert all(t.isascii() and t.isalpha() and t.islower() and len(t) >= 5 for t in fillers)
    assert tok["added_tokens"] == TOKENIZER["added_tokens"] and tok["decoder"] == TOKENIZER["decoder"]
    assert (target / "tokenizer_config.json").read_text() == (
        tokenizer_dir / "tokenizer_config.json"
    ).read_text()


def test_the_fallback_keeps_the_shape_with_fewer_layers_and_bad_input_exits_2(
    tokenizer_dir: Path, tmp_path: Path
) -> None:
    c = target_script.target_config(_config(), layers=30, keep_model_type=True)
    assert c["num_hidden_layers"] == 30 and c["model_type"] == "gemma4_text"
    assert c["layer_types"] == (["sliding_attention"] * 5 + ["full_attention"]) * 5
    assert _params(c) < _params(_config())
    done = _run(
        "gemma4_target.py", "--tokenizer", str(tokenizer_dir), "--out", str(tmp_path / "x"), "--layers", "32"
    )
    assert done.returncode == 2 and "multiple of 6" in done.stderr and not (tmp_path / "x").exists()
    with pytest.raises(ValueError, match="past the config's vocab_size"):
        target_script.pad_tokenizer(TOKENIZER, 5)


def test_a_gemma4_target_gets_a_dflash_drafter_in_z_labs_layout(target: Path, tmp_path: Path) -> None:
    out = tmp_path / "drafters"
    done = _run("make_drafters.py", "--target", str(target), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["dflash"]  # no EAGLE-3 or draft model for Gemma-4
    c = json.loads((out / "dflash" / "config.json").read_text())
    # z-lab/gemma-4-31B-it-DFlash's config.json, field by field
    assert c["architectures"] == ["DFlashDraftModel"] and c["model_type"] == "qwen3"  # registry.py:608
    assert (c["num_hidden_layers"], c["hidden_size"], c["intermediate_size"]) == (5, 5376, 10752)
    assert (c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]) == (64, 8, 128)
    assert c["layer_types"] == ["sliding_attention"] * 4 + ["full_attention"] and c["sliding_window"] == 2048
    assert c["use_sliding_window"] and c["tie_word_embeddings"] and c["final_logit_softcapping"] == 30.0
    assert c["dflash_config"] == {"mask_token_id": 4, "target_layer_ids": [1, 12, 23, 35, 46, 57]}
    assert (c["block_size"], c["num_target_layers"], c["vocab_size"], c["rope_theta"]) == (
        16,
        60,
        262144,
        1000000,
    )
    # sliding layers causal, the full one not (qwen3_dflash.py:56-61): no override in dflash_config
    assert "causal" not in c["dflash_config"] and "use_swa" not in c["dflash_config"]
    assert "eagle_aux_hidden_state_layer_ids" not in c  # vLLM would take those before dflash_config
    assert (out / "dflash" / "tokenizer.json").read_text() == (target / "tokenizer.json").read_text()


def test_the_target_layer_rule_gives_both_z_lab_gemma4_drafters() -> None:
    m = drafters_script
    assert m.dflash_target_layer_ids(60, 6) == [1, 12, 23, 35, 46, 57]  # gemma-4-31B-it-DFlash
    assert m.dflash_target_layer_ids(30, 6) == [1, 6, 11, 17, 22, 27]  # gemma-4-26B-A4B-it-DFlash
    small = target_script.target_config(_config(), layers=30)
    assert m.gemma4_dflash_config(small)["dflash_config"]["target_layer_ids"] == [1, 6, 11, 17, 22, 27]
    with pytest.raises(ValueError, match="outside the vocabulary"):
        m.gemma4_dflash_config(_config(), mask_token_id=262144)
    assert m.is_gemma4(small) and not m.is_gemma4({"architectures": ["Qwen3ForCausalLM"]})


def test_asking_a_gemma4_target_for_another_drafter_exits_2(target: Path, tmp_path: Path) -> None:
    done = _run(
        "make_drafters.py", "--target", str(target), "--out", str(tmp_path / "d"), "--methods", "eagle3"
    )
    assert done.returncode == 2 and "DFlash drafter only" in done.stderr


def test_the_kv_cache_one_sequence_needs_is_vllms_per_layer_sum() -> None:
    c = _config()
    kinds = check_script.layer_kinds(c)
    assert kinds.count((16, 256, 1024)) == 50 and kinds.count((4, 512, None)) == 10
    gib = 1024**3
    # sliding layers hold min(window - 1 + in-flight, tokens) + one block: every token at 8192
    assert check_script.kv_needs(c, None, 8192, 8192, 2) * gib == (8192 + 16) * 50 * 16384 + 8192 * 10 * 8192
    # the model's own 262,144 tokens: 33 GiB of bf16 KV for one sequence, so stock sets 8192
    assert check_script.kv_needs(c, None, 262144, 8192, 2) > 33
    assert (
        check_script.kv_needs(c, None, 24576, 16384, 1)
        > 10.3
        > 7
        > check_script.kv_needs(c, None, 16384, 16384, 1)
    )


def _facts(target: Path) -> Facts:
    """What the worker reads on the H100 from this folder (search/host.py), with its 81,559 MiB."""
    cfg = json.loads((target / "config.json").read_text())
    heads = model_heads(cfg)
    return Facts(
        device="cuda",
        model_max_len=cfg["max_position_embeddings"],
        engine_packages=frozenset(),
        model_shape=ModelShape.of(cfg),
        device_memory_bytes=81559 * 2**20,
        model_heads=heads[0],
        model_kv_heads=heads[1],
        gpu_count=1,
    )


def _argv(config: Any) -> list[str]:
    spec = load_spec(STUDY, [])
    plan = build_launch(spec.engine, spec.model, config, port=8000, api_key="0" * 48, key_file=Path("/k"))
    return list(plan.argv)


def _flag(argv: list[str], flag: str) -> str | None:
    return argv[argv.index(flag) + 1] if flag in argv else None


def test_every_trial_of_the_study_launches_as_planned_and_passes_novas_rules(target: Path) -> None:
    spec = load_spec(STUDY, [])
    facts = _facts(target)
    assert facts.model_shape is None  # sliding/full mixes: the memory rule stays silent (engine/memory.py)
    stock = with_graph_sizes(spec, stock_config(spec))
    base = tuned_config(spec)
    tuned = with_graph_sizes(spec, base)
    lengths = spec.space.speculative.acceptance["dflash"].listed_lengths()
    assert lengths == [6.0, 3.0]  # the published length first, then the lower one
    drafted = [
        with_graph_sizes(
            spec, sample(optuna.trial.FixedTrial({"acceptance_length": L}), spec, "speculative", base)
        )
        for L in lengths
    ]
    for config in (stock, tuned, *drafted):
        assert incompatibilities(config, facts) == []
        argv = _argv(config)
        assert _flag(argv, "--attention-backend") == "TRITON_ATTN"  # every trial, DFlash's rule included
        assert _flag(argv, "--load-format") == "dummy" and "--limit-mm-per-prompt" not in argv
    s = _argv(stock)
    assert _flag(s, "--max-model-len") == "8192" and _flag(s, "--kv-cache-dtype") is None
    assert _flag(s, "--gpu-memory-utilization") is None and _flag(s, "--max-num-seqs") is None
    for config in (tuned, *drafted):
        a = _argv(config)
        assert (_flag(a, "--kv-cache-dtype"), _flag(a, "--gpu-memory-utilization")) == ("fp8_e4m3", "0.95")
        assert (_flag(a, "--max-num-seqs"), _flag(a, "--max-num-batched-tokens")) == ("128", "16384")
        assert _flag(a, "--max-model-len") == "16384"
        assert "--enable-prefix-caching" in a and "--enable-chunked-prefill" in a
    assert "--speculative-config" not in _argv(tuned)
    for L, config in zip(lengths, drafted, strict=True):
        payload = json.loads(_flag(_argv(config), "--speculative-config") or "{}")
        assert payload == {
            "method": "dflash",
            "num_speculative_tokens": 15,
            "model": ".gpu/gemma-4-31b-drafters/dflash",
            "rejection_sample_method": "synthetic",
            "synthetic_acceptance_length": L,
        }
        assert _flag(_argv(config), "--max-cudagraph-capture-size") == "512"  # 128 x 16, vLLM's cap
    assert _flag(_argv(tuned), "--max-cudagraph-capture-size") == "128"


def test_the_study_and_its_wrapper_point_at_the_folders_the_builders_write() -> None:
    spec = load_spec(STUDY, [])
    assert spec.model.path == target_script.parser().parse_args([]).out.as_posix() == ".gpu/gemma-4-31b"
    assert spec.model.vocab_size == _config()["vocab_size"]
    assert spec.space.speculative.drafters == {"dflash": ".gpu/gemma-4-31b-drafters/dflash"}
    assert spec.stages == ["speculative"] and spec.baselines == ["stock"] and spec.budget.n_trials == 4
    assert spec.sweep.concurrency == [1, 16, 32, 128] and spec.sweep.repeats >= 3
    assert spec.engine.env["VLLM_USE_V2_MODEL_RUNNER"] == "1" and spec.engine.env["PYTHONPATH"] == "/tmp/site"
    wrapper = WRAPPER.read_text()
    assert "SPEC=studies/experiments/h100-gemma-4-31b-dflash.yaml" in wrapper
    assert "target=.gpu/gemma-4-31b drafters=.gpu/gemma-4-31b-drafters" in wrapper
    assert "benchmarks.gpu.gemma4_check" in wrapper and f"W={Path(spec.artifacts_dir).parent}" in wrapper
