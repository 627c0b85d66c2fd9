"""The H200 drafters (benchmarks/gpu/make_drafters.py) and their study
(studies/experiments/h200-qwen3-8b-drafters.yaml): on a Qwen3-8B-shaped target built here (the
committed benchmarks/gpu/qwen3-8b-config.json), the script
writes the config fields vLLM 0.26.0 reads for each method, consistent with the target, and the study
points at the folders it writes, with one trial per drafter on a fixed tuned stack."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import optuna
import pytest

from nova_search.engine.command import config_args
from nova_search.engine.probe import parse_metrics
from nova_search.search.configs import sample, tuned_config
from nova_search.search.rules import Facts, incompatibilities
from nova_search.spec import load_spec
from tests.support import REPO
from tests.support.scripts import benchmark_script

make_drafters = benchmark_script("gpu/make_drafters.py")

SCRIPT = REPO / "benchmarks" / "gpu" / "make_drafters.py"
TARGET_CONFIG = REPO / "benchmarks" / "gpu" / "qwen3-8b-config.json"
STUDY = REPO / "studies" / "experiments" / "h200-qwen3-8b-drafters.yaml"
TOKENIZER = {"tokenizer.json": '{"model": {}}', "tokenizer_config.json": "{}", "chat_template.jinja": "x"}


def _script() -> ModuleType:
    return make_drafters


@pytest.fixture
def target(tmp_path: Path) -> Path:
    """A Qwen3-8B-shaped model folder with no weights, as .gpu/model is on the H200."""
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(TARGET_CONFIG.read_text())
    for name, text in TOKENIZER.items():
        (folder / name).write_text(text)
    return folder


@pytest.fixture
def drafters(target: Path, tmp_path: Path) -> Path:
    """The script run stand-alone, as on the H200: the standard library only (-I -S: no site-packages)."""
    out = tmp_path / "drafters"
    done = subprocess.run(
        [sys.executable, "-I", "-S", str(SCRIPT), "--target", str(target), "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return out


def _load(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "config.json").read_text())


def _target() -> dict[str, Any]:
    return json.loads(TARGET_CONFIG.read_text())


def test_every_drafter_folder_has_a_config_and_the_tokenizer_and_no_weights(drafters: Path) -> None:
    assert sorted(p.name for p in drafters.iterdir()) == ["dflash", "draft", "eagle3"]
    for folder in drafters.iterdir():
        names = {p.name for p in folder.iterdir()}
        assert names == {"config.json", *TOKENIZER}  # dummy loading gives the weights (module docstring)
        for name, text in TOKENIZER.items():
            assert (folder / name).read_text() == text


def test_eagle3_head_reads_three_target_layers_at_the_targets_width(drafters: Path) -> None:
    t, c = _target(), _load(drafters / "eagle3")
    # registry.py:620 -> qwen3_eagle3.Eagle3Qwen3ForCausalLM (EAGLEConfig keeps an Eagle3* name)
    assert c["architectures"] == ["Eagle3Qwen3ForCausalLM"] and c["model_type"] == "qwen3"
    assert c["num_hidden_layers"] == 1
    # the target's embeddings and lm_head are shared with a head that loaded none: same width, vocab
    assert c["hidden_size"] == c["target_hidden_size"] == t["hidden_size"]
    assert c["vocab_size"] == c["draft_vocab_size"] == t["vocab_size"]
    for key in (
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "intermediate_size",
        "rms_norm_eps",
    ):
        assert c[key] == t[key], key
    ids = c["eagle_aux_hidden_state_layer_ids"]
    assert ids == c["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [2, 18, 33]
    # aux id 0 is the embeddings and i the output of layer i - 1: 0..num_hidden_layers
    assert len(set(ids)) == 3 and all(0 <= i <= t["num_hidden_layers"] for i in ids)
    assert c["eagle_config"]["use_aux_hidden_state"] is True
    assert not c["tie_word_embeddings"] and c["sliding_window"] is None and not c["use_sliding_window"]


def test_dflash_drafter_reads_as_many_target_layers_as_it_has_layers(drafters: Path) -> None:
    t, c = _target(), _load(drafters / "dflash")
    assert c["architectures"] == ["DFlashDraftModel"] and c["model_type"] == "qwen3"  # registry.py:608
    assert c["hidden_size"] == t["hidden_size"] and c["vocab_size"] == t["vocab_size"]
    for key in ("num_attention_heads", "num_key_value_heads", "head_dim", "intermediate_size"):
        assert c[key] == t[key], key
    d = c["dflash_config"]
    assert 0 <= d["mask_token_id"] < t["vocab_size"] and d["mask_token_id"] == 151669
    ids = d["target_layer_ids"]
    assert ids == [1, 9, 17, 25, 33] and len(ids) == c["num_hidden_layers"] == 5
    # layer indices, read as aux ids i + 1 (eagle3_utils.py:42-46): 0..num_hidden_layers - 1
    assert ids == sorted(set(ids)) and all(0 <= i < t["num_hidden_layers"] for i in ids)
    # vLLM would take these before dflash_config, and sliding or causal layers change the attention
    for key in ("eagle_aux_hidden_state_layer_ids", "layer_types", "eagle_config"):
        assert key not in c, key
    assert "use_swa" not in d and "causal" not in d and c["sliding_window"] is None
    assert c["num_target_layers"] == t["num_hidden_layers"] and c["block_size"] == 16


def test_draft_model_is_a_small_qwen3_with_the_targets_vocabulary(drafters: Path) -> None:
    t, c = _target(), _load(drafters / "draft")
    assert c["architectures"] == ["Qwen3ForCausalLM"] and c["model_type"] == "qwen3"
    assert c["vocab_size"] == t["vocab_size"]  # vLLM refuses another size (speculative.py:1275-1290)
    assert (c["num_hidden_layers"], c["hidden_size"], c["intermediate_size"]) == (2, 1024, 3072)
    assert c["head_dim"] == t["head_dim"] and c["num_key_value_heads"] == t["num_key_value_heads"]
    assert c["num_attention_heads"] % c["num_key_value_heads"] == 0
    assert c["max_position_embeddings"] >= 4096  # the study's max_model_len


def test_the_llama_eagle3_variant_and_the_layer_rules() -> None:
    m = _script()
    t = _target()
    c = m.eagle3_config(t, arch="llama")
    assert c["architectures"] == ["LlamaForCausalLMEagle3"] and c["model_type"] == "llama"  # registry.py:617
    assert c["eagle_aux_hidden_state_layer_ids"] == [2, 18, 33]
    assert m.dflash_target_layer_ids(36, 5) == [1, 9, 17, 25, 33]
    assert m.dflash_target_layer_ids(36, 1) == [18]
    assert m.dflash_target_layer_ids(28, 3) == [1, 13, 25]
    with pytest.raises(ValueError):
        m.dflash_target_layer_ids(4, 3)
    small = {**t, "vocab_size": 1000}
    assert m.dflash_config(small)["dflash_config"]["mask_token_id"] == 999  # inside a smaller vocabulary
    with pytest.raises(ValueError):
        m.dflash_config(t, mask_token_id=t["vocab_size"])
    with pytest.raises(ValueError):
        m.eagle3_config(t, arch="mistral")


def test_the_script_refuses_a_target_without_its_shape(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "qwen3", "hidden_size": 4096}))
    with pytest.raises(SystemExit, match="num_hidden_layers"):
        _script().write(tmp_path, tmp_path / "out")


def test_the_study_points_at_the_folders_the_script_writes_by_default() -> None:
    m = _script()
    spec = load_spec(STUDY, [])
    defaults = m.parser().parse_args([])
    sp = spec.space.speculative
    assert sp.methods() == ["eagle3", "dflash", "draft_model", "ngram"]  # the new drafters first
    assert "suffix" not in sp.methods()  # vLLM 0.26 needs arctic-inference for it; the bundle has none
    out = defaults.out.as_posix()
    assert sp.drafters == {method: f"{out}/{folder}" for method, folder in m.FOLDERS.items()}
    assert (
        spec.model.path == defaults.target.as_posix() == ".gpu/model"
        and spec.model.vocab_size == _target()["vocab_size"]
    )
    assert not any(h in sp.drafters["draft_model"].lower() for h in m.METHOD_HINTS)
    assert spec.stages == ["speculative"] and spec.budget.n_trials == 1 + len(sp.methods())
    assert spec.sweep.concurrency == [1, 16, 64] and spec.sweep.repeats >= 3 and spec.sweep.duration_s == 8
    assert spec.engine.extra_args == ["--load-format", "dummy"]
    env = spec.engine.env
    assert env["PYTHONPATH"] == "/tmp/site" and env["VLLM_USE_FLASHINFER_SAMPLER"] == "0"


def test_every_drafter_trial_is_launchable_on_the_tuned_stack() -> None:
    spec = load_spec(STUDY, [])
    base = tuned_config(spec)
    facts = Facts(
        device="cuda", model_max_len=40960, engine_packages=frozenset(), model_heads=32, model_kv_heads=8
    )
    for method in spec.space.speculative.methods():
        config = sample(optuna.trial.FixedTrial({"spec_method": method}), spec, "speculative", base)
        assert incompatibilities(config, facts) == [], method
        args = config_args(config)
        payload = json.loads(args[args.index("--speculative-config") + 1])
        assert payload["method"] == method and payload["num_speculative_tokens"] == 3
        assert payload.get("model") == spec.space.speculative.drafters.get(method)
        assert (config.attention_backend == "TRITON_ATTN") == (method == "dflash")  # nova's DFlash rule
        # the rest is the tuned stack; vLLM schedules max_num_batched_tokens less the drafting slots
        # (config/vllm.py:1689-1715); kept so that without chunked prefill a max_model_len prompt fits a step
        assert (config.max_num_seqs, config.max_num_batched_tokens) == (198, 8192)
        assert config.enable_chunked_prefill is False and config.max_model_len == 4096
        k = payload["num_speculative_tokens"]
        slots = (k - 1 if method == "dflash" else 0) + (1 if method == "draft_model" else 0)
        assert config.max_num_batched_tokens - slots * config.max_num_seqs >= config.max_model_len


@pytest.mark.recorded
def test_the_committed_dflash_smoke_booted_the_configs_this_script_writes_and_drafted() -> None:
    """benchmarks/results/h200-dflash-smoke: vLLM 0.26.0 on the H200 read make_drafters.py's DFlash folder,
    served, and drafted k = 3 tokens a step (random weights: none accepted)."""
    smoke = REPO / "benchmarks" / "results" / "h200-dflash-smoke"
    log = (smoke / "dflash.log").read_text()
    assert "Resolved architecture: DFlashDraftModel" in log and "Capturing model for DFlash speculator" in log
    assert "max_num_scheduled_tokens is set to 6144" in log  # 8192 - 1024 seqs x (k - 1) parallel slots
    counters = parse_metrics((smoke / "metrics.txt").read_text()).values
    drafts = counters["vllm:spec_decode_num_drafts_total"]
    assert drafts > 0 and counters["vllm:spec_decode_num_draft_tokens_total"] == 3 * drafts
    assert counters["vllm:spec_decode_num_accepted_tokens_total"] == 0.0
    assert "dflash" in (smoke / "make.txt").read_text()
