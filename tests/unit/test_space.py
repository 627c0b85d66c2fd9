"""Sampling (conditional space, fixed values, engine.defaults) and the compatibility table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import optuna
import pytest

from nova_search.knobs import EngineConfig, SpeculativeConfig
from nova_search.search.configs import sample, stock_config
from nova_search.search.host import host_facts
from nova_search.search.rules import RULES, Facts, incompatibilities
from nova_search.spec import StudySpec, parse_spec

BASE_PARAMS: dict[str, Any] = {
    "kv_cache_dtype": "fp8",
    "max_num_seqs": 8,
    "max_num_batched_tokens": 1024,
    "enable_prefix_caching": True,
    "enable_chunked_prefill": False,
}


def with_space(raw: dict[str, Any], **space: Any) -> StudySpec:
    raw["space"] = space
    return parse_spec(raw)


# ---------------------------------------------------------------- stock config


def test_stock_config_is_engine_defaults_only(tiny_spec: StudySpec) -> None:
    assert stock_config(tiny_spec) == EngineConfig(gpu_memory_utilization=0.05, max_model_len=2048)


def test_stock_config_tensor_parallel(tiny_raw: dict[str, Any]) -> None:
    tiny_raw["engine"]["tensor_parallel_size"] = 2
    tiny_raw["engine"]["defaults"] = {"kv_cache_dtype": "auto", "enable_prefix_caching": False}
    c = stock_config(parse_spec(tiny_raw))
    assert c == EngineConfig(kv_cache_dtype="auto", enable_prefix_caching=False, tensor_parallel_size=2)


# ---------------------------------------------------------------- FixedTrial sampling


def test_method_none_has_no_speculative_params(tiny_spec: StudySpec) -> None:
    trial = optuna.trial.FixedTrial({**BASE_PARAMS, "spec_method": "none"})
    config = sample(trial, tiny_spec)
    assert config == EngineConfig(
        kv_cache_dtype="fp8",
        gpu_memory_utilization=0.05,  # engine.defaults
        max_num_seqs=8,
        max_num_batched_tokens=1024,
        enable_prefix_caching=True,
        enable_chunked_prefill=False,
        max_model_len=2048,  # engine.defaults
    )
    assert config.speculative is None
    assert set(trial.params) == {*BASE_PARAMS, "spec_method"}
    assert "num_speculative_tokens" not in trial.params


def test_ngram_samples_lookup_window(tiny_spec: StudySpec) -> None:
    trial = optuna.trial.FixedTrial(
        {**BASE_PARAMS, "spec_method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}
    )
    config = sample(trial, tiny_spec)
    assert config.speculative == SpeculativeConfig(
        method="ngram",
        num_speculative_tokens=3,
        model=None,
        prompt_lookup_min=2,
        prompt_lookup_max=4,
    )
    # prompt_lookup_min is fixed in the spec: used, never suggested
    assert "prompt_lookup_min" not in trial.params
    assert trial.params["prompt_lookup_max"] == 4
    assert trial.params["num_speculative_tokens"] == 3


def test_draft_model_uses_drafter_and_no_lookup(tiny_spec: StudySpec) -> None:
    trial = optuna.trial.FixedTrial(
        {**BASE_PARAMS, "spec_method": "draft_model", "num_speculative_tokens": 5}
    )
    config = sample(trial, tiny_spec)
    assert config.speculative == SpeculativeConfig(
        method="draft_model", num_speculative_tokens=5, model=".nova/tiny-model"
    )
    assert "prompt_lookup_max" not in trial.params
    assert "prompt_lookup_min" not in trial.params


def test_fixed_and_single_choice_params_are_not_suggested(tiny_raw: dict[str, Any]) -> None:
    spec = with_space(
        tiny_raw,
        kv_cache_dtype={"choices": ["fp8"]},
        max_num_seqs=24,
        enable_prefix_caching=False,
        gpu_memory_utilization={"low": 0.2, "high": 0.4},
        speculative={"method": "ngram", "num_speculative_tokens": 2},
    )
    trial = optuna.trial.FixedTrial({"gpu_memory_utilization": 0.25})
    config = sample(trial, spec)
    assert trial.params == {"gpu_memory_utilization": 0.25}
    assert config.kv_cache_dtype == "fp8"
    assert config.max_num_seqs == 24
    assert config.enable_prefix_caching is False
    assert config.gpu_memory_utilization == 0.25  # the space wins over engine.defaults (0.3)
    assert config.speculative == SpeculativeConfig(method="ngram", num_speculative_tokens=2)


def test_engine_defaults_fill_fields_the_space_leaves_out(tiny_raw: dict[str, Any]) -> None:
    tiny_raw["engine"]["defaults"] = {
        "max_num_seqs": 16,
        "max_num_batched_tokens": 4096,
        "max_model_len": 1024,
        "attention_backend": "FLEX_ATTENTION",
    }
    spec = with_space(tiny_raw, max_num_seqs={"low": 2, "high": 8})
    trial = optuna.trial.FixedTrial({"max_num_seqs": 4})
    config = sample(trial, spec)
    assert config == EngineConfig(
        max_num_seqs=4,
        max_num_batched_tokens=4096,
        max_model_len=1024,
        attention_backend="FLEX_ATTENTION",
    )


def test_empty_space_is_the_stock_config(tiny_spec: StudySpec, tiny_raw: dict[str, Any]) -> None:
    spec = with_space(tiny_raw)
    trial = optuna.trial.FixedTrial({})
    assert sample(trial, spec) == stock_config(tiny_spec)
    assert trial.params == {}


def test_dflash_forces_triton_backend(tiny_raw: dict[str, Any]) -> None:
    spec = with_space(
        tiny_raw,
        speculative={
            "method": "dflash",
            "num_speculative_tokens": 4,
            "drafters": {"dflash": "org/dflash"},
        },
    )
    config = sample(optuna.trial.FixedTrial({}), spec)
    assert config.attention_backend == "TRITON_ATTN"
    assert config.speculative == SpeculativeConfig(
        method="dflash", num_speculative_tokens=4, model="org/dflash"
    )
    assert incompatibilities(config, Facts()) == []


def test_dflash_keeps_an_explicit_backend_and_the_rule_prunes_it(tiny_raw: dict[str, Any]) -> None:
    spec = with_space(
        tiny_raw,
        attention_backend="FLASH_ATTN",
        speculative={"method": "dflash", "num_speculative_tokens": 4, "drafters": {"dflash": "d"}},
    )
    config = sample(optuna.trial.FixedTrial({}), spec)
    assert config.attention_backend == "FLASH_ATTN"
    (reason,) = incompatibilities(config, Facts())
    assert reason.startswith("dflash_triton_backend:")


def test_other_methods_do_not_touch_the_backend(tiny_raw: dict[str, Any]) -> None:
    spec = with_space(
        tiny_raw,
        speculative={"method": "eagle3", "num_speculative_tokens": 3, "drafters": {"eagle3": "e"}},
    )
    config = sample(optuna.trial.FixedTrial({}), spec)
    assert config.attention_backend is None
    assert config.speculative is not None and config.speculative.model == "e"


def test_out_of_range_fixed_trial_is_rejected_by_optuna(tiny_spec: StudySpec) -> None:
    trial = optuna.trial.FixedTrial({**BASE_PARAMS, "spec_method": "mtp"})  # not a choice
    with pytest.raises(ValueError):
        sample(trial, tiny_spec)


# ---------------------------------------------------------------- a real study


def test_tpe_study_samples_a_conditional_space(tiny_spec: StudySpec) -> None:
    sampler = optuna.samplers.TPESampler(seed=1, multivariate=True, group=True, n_startup_trials=4)
    study = optuna.create_study(directions=["maximize", "minimize"], sampler=sampler)
    methods_seen = set()
    for i in range(16):
        trial = study.ask()
        config = sample(trial, tiny_spec)
        p = trial.params
        method = p["spec_method"]
        methods_seen.add(method)
        assert method in ("none", "ngram", "draft_model")
        assert p["kv_cache_dtype"] in ("auto", "fp8")
        assert 4 <= p["max_num_seqs"] <= 32 and isinstance(p["max_num_seqs"], int)
        assert 512 <= p["max_num_batched_tokens"] <= 4096
        assert trial.distributions["max_num_seqs"].log is True
        assert "prompt_lookup_min" not in p  # fixed in the spec
        assert "gpu_memory_utilization" not in p  # not in the space
        assert config.gpu_memory_utilization == 0.05 and config.max_model_len == 2048
        if method == "none":
            assert config.speculative is None
            assert "num_speculative_tokens" not in p and "prompt_lookup_max" not in p
        else:
            assert config.speculative is not None
            assert config.speculative.method == method
            assert config.speculative.num_speculative_tokens == p["num_speculative_tokens"]
            assert 2 <= p["num_speculative_tokens"] <= 5
            if method == "ngram":
                assert 2 <= p["prompt_lookup_max"] <= 5
                assert config.speculative.prompt_lookup_min == 2
                assert config.speculative.prompt_lookup_max == p["prompt_lookup_max"]
            else:
                assert "prompt_lookup_max" not in p
                assert config.speculative.model == ".nova/tiny-model"
        study.tell(trial, [float(config.max_num_seqs or 0), float(i)])
    assert len(study.trials) == 16
    assert len(methods_seen) >= 2  # the conditional branches were both explored


def test_stepped_and_float_ranges_in_a_real_study(tiny_raw: dict[str, Any]) -> None:
    spec = with_space(
        tiny_raw,
        max_num_batched_tokens={"low": 512, "high": 4096, "step": 512},
        gpu_memory_utilization={"low": 0.2, "high": 0.5},
        attention_backend={"choices": ["TRITON_ATTN", "FLEX_ATTENTION"]},
    )
    study = optuna.create_study(
        directions=["maximize"], sampler=optuna.samplers.TPESampler(seed=3, n_startup_trials=3)
    )
    for _ in range(10):
        trial = study.ask()
        config = sample(trial, spec)
        assert config.max_num_batched_tokens is not None
        assert config.max_num_batched_tokens % 512 == 0
        assert 512 <= config.max_num_batched_tokens <= 4096
        assert config.gpu_memory_utilization is not None
        assert 0.2 <= config.gpu_memory_utilization <= 0.5
        assert config.attention_backend in ("TRITON_ATTN", "FLEX_ATTENTION")
        # the default method is a fixed "none": not a parameter
        assert set(trial.params) == {
            "max_num_batched_tokens",
            "gpu_memory_utilization",
            "attention_backend",
        }
        study.tell(trial, [config.gpu_memory_utilization])


def test_enqueued_values_are_sampled_exactly(tiny_spec: StudySpec) -> None:
    study = optuna.create_study(directions=["maximize"], sampler=optuna.samplers.RandomSampler(seed=0))
    study.enqueue_trial(
        {**BASE_PARAMS, "spec_method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 3}
    )
    trial = study.ask()
    config = sample(trial, tiny_spec)
    assert config.max_num_batched_tokens == 1024
    assert config.speculative == SpeculativeConfig(
        method="ngram", num_speculative_tokens=4, prompt_lookup_min=2, prompt_lookup_max=3
    )


# ---------------------------------------------------------------- compatibility table


def reasons(config: EngineConfig, facts: Facts) -> list[str]:
    return incompatibilities(config, facts)


def test_rule_names_are_unique() -> None:
    names = [r.name for r in RULES]
    assert len(names) == len(set(names))


def test_clean_config_passes() -> None:
    assert reasons(EngineConfig(), Facts()) == []
    assert reasons(EngineConfig(kv_cache_dtype="auto", max_num_batched_tokens=256), Facts(device="cpu")) == []


def test_chunked_prefill_budget_rule() -> None:
    c = EngineConfig(enable_chunked_prefill=False, max_num_batched_tokens=512, max_model_len=2048)
    (r,) = reasons(c, Facts())
    assert r.startswith("chunked_prefill_budget:")
    assert "(512)" in r and "(2048)" in r


@pytest.mark.parametrize(
    "config",
    [
        EngineConfig(enable_chunked_prefill=True, max_num_batched_tokens=512, max_model_len=2048),
        EngineConfig(enable_chunked_prefill=None, max_num_batched_tokens=512, max_model_len=2048),
        EngineConfig(enable_chunked_prefill=False, max_num_batched_tokens=2048, max_model_len=2048),
        EngineConfig(enable_chunked_prefill=False, max_num_batched_tokens=4096, max_model_len=2048),
        EngineConfig(enable_chunked_prefill=False, max_num_batched_tokens=None, max_model_len=2048),
        EngineConfig(enable_chunked_prefill=False, max_num_batched_tokens=512, max_model_len=None),
    ],
    ids=["chunked-on", "chunked-default", "equal", "above", "no-budget", "no-length-known"],
)
def test_chunked_prefill_budget_rule_allows(config: EngineConfig) -> None:
    assert reasons(config, Facts()) == []


def test_chunked_prefill_budget_uses_model_max_len_fact() -> None:
    c = EngineConfig(enable_chunked_prefill=False, max_num_batched_tokens=2048)
    (r,) = reasons(c, Facts(model_max_len=4096))
    assert r.startswith("chunked_prefill_budget:") and "(4096)" in r
    assert reasons(c, Facts(model_max_len=2048)) == []
    # an explicit max_model_len wins over the model's
    assert reasons(c.with_values(max_model_len=1024), Facts(model_max_len=4096)) == []


@pytest.mark.parametrize("dtype", ["fp8", "fp8_e4m3", "fp8_e5m2"])
def test_fp8_kv_cache_on_cpu_without_avx512(dtype: str) -> None:
    facts = Facts(device="cpu", cpu_flags=frozenset({"sse4_2", "avx2", "fma"}))
    (r,) = reasons(EngineConfig(kv_cache_dtype=dtype), facts)
    assert r.startswith("fp8_kv_cache_on_cpu:")
    assert "AVX-512 or AMX" in r


@pytest.mark.parametrize(
    "facts",
    [
        Facts(device="cpu", cpu_flags=frozenset({"avx2", "avx512f"})),
        Facts(device="cpu", cpu_flags=frozenset({"amx_bf16"})),
        Facts(device="cpu", cpu_flags=frozenset({"amx_tile"})),
        Facts(device="cuda"),
    ],
    ids=["avx512f", "amx_bf16", "amx_tile", "cuda"],
)
def test_fp8_kv_cache_allowed(facts: Facts) -> None:
    assert reasons(EngineConfig(kv_cache_dtype="fp8"), facts) == []


def test_auto_kv_cache_on_cpu_is_fine() -> None:
    assert reasons(EngineConfig(kv_cache_dtype="auto"), Facts(device="cpu")) == []


def test_ngram_window_rule() -> None:
    bad = SpeculativeConfig(
        method="ngram", num_speculative_tokens=3, prompt_lookup_min=5, prompt_lookup_max=2
    )
    (r,) = reasons(EngineConfig(speculative=bad), Facts())
    assert r.startswith("ngram_window:") and "(5)" in r and "(2)" in r
    ok = SpeculativeConfig(method="ngram", num_speculative_tokens=3, prompt_lookup_min=3, prompt_lookup_max=3)
    assert reasons(EngineConfig(speculative=ok), Facts()) == []
    only_max = SpeculativeConfig(method="ngram", num_speculative_tokens=3, prompt_lookup_max=1)
    assert reasons(EngineConfig(speculative=only_max), Facts()) == []


def test_mtp_needs_heads() -> None:
    c = EngineConfig(speculative=SpeculativeConfig(method="mtp", num_speculative_tokens=1))
    (r,) = reasons(c, Facts(model_has_mtp=False))
    assert r.startswith("mtp_needs_heads:")
    assert reasons(c, Facts(model_has_mtp=True)) == []


@pytest.mark.parametrize("backend", [None, "TRITON_ATTN", "triton_attn"])
def test_dflash_triton_allowed(backend: str | None) -> None:
    c = EngineConfig(
        attention_backend=backend,
        speculative=SpeculativeConfig(method="dflash", num_speculative_tokens=4, model="d"),
    )
    assert reasons(c, Facts()) == []


def test_dflash_with_another_backend() -> None:
    c = EngineConfig(
        attention_backend="FLASHINFER",
        speculative=SpeculativeConfig(method="dflash", num_speculative_tokens=4, model="d"),
    )
    (r,) = reasons(c, Facts())
    assert r.startswith("dflash_triton_backend:") and "FLASHINFER" in r
    # the same backend is fine for another method
    assert reasons(c.with_values(speculative=None), Facts()) == []


def test_every_broken_rule_is_listed_in_table_order() -> None:
    c = EngineConfig(
        kv_cache_dtype="fp8",
        enable_chunked_prefill=False,
        max_num_batched_tokens=256,
        max_model_len=2048,
        speculative=SpeculativeConfig(method="mtp", num_speculative_tokens=1),
    )
    out = reasons(c, Facts(device="cpu"))
    assert [r.split(":")[0] for r in out] == [
        "chunked_prefill_budget",
        "fp8_kv_cache_on_cpu",
        "mtp_needs_heads",
    ]


# ---------------------------------------------------------------- host facts


def test_host_facts_reads_model_config(tmp_path: Path, tiny_raw: dict[str, Any]) -> None:
    (tmp_path / "config.json").write_text(
        json.dumps({"max_position_embeddings": 8192, "num_nextn_predict_layers": 1})
    )
    tiny_raw["model"]["path"] = str(tmp_path)
    facts = host_facts(parse_spec(tiny_raw))
    assert facts.device == "cpu"
    assert facts.model_max_len == 8192
    assert facts.model_has_mtp is True
    assert isinstance(facts.cpu_flags, frozenset)


def test_host_facts_without_model_config(
    tmp_path: Path, tiny_raw: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # nvidia-smi's answer on a machine without a GPU, without starting it (a unit test starts no process)
    monkeypatch.setattr("nova_search.search.host._gpu_facts", lambda gpus: (None, None))
    tiny_raw["model"]["path"] = str(tmp_path / "missing")
    tiny_raw["engine"]["device"] = "cuda"
    facts = host_facts(parse_spec(tiny_raw))
    assert facts.device == "cuda"
    assert facts.model_max_len is None
    assert facts.model_has_mtp is False


def test_suffix_needs_arctic_inference_where_the_engine_environment_is_known() -> None:
    c = EngineConfig(speculative=SpeculativeConfig(method="suffix", num_speculative_tokens=3))
    (r,) = incompatibilities(c, Facts(engine_packages=frozenset()))
    assert r.startswith("suffix_needs_arctic_inference:") and "pip install arctic-inference" in r
    assert incompatibilities(c, Facts(engine_packages=frozenset({"arctic_inference"}))) == []
    # an engine.command launcher (an image's `vllm serve`): its environment is not known, so it boots
    assert incompatibilities(c, Facts(engine_packages=None)) == []
