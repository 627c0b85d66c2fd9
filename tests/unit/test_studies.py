"""The example specs under studies/: they validate, and the reference study's tuned launches and
drafters come out as the reference's flags."""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest

from nova_search.engine.command import config_args
from nova_search.errors import SpecError
from nova_search.measure.slo import wilson
from nova_search.search.configs import sample, tuned_config
from nova_search.search.rules import Facts, incompatibilities
from nova_search.spec import load_spec

STUDIES = Path(__file__).resolve().parents[2] / "studies"


@pytest.mark.parametrize("path", sorted(STUDIES.glob("*.yaml")), ids=lambda p: p.name)
def test_every_example_spec_validates(path: Path) -> None:
    spec = load_spec(path, [])
    assert spec.name and spec.sweep.concurrency


def test_qwen3_30b_tuned_baseline_is_the_reference_launch() -> None:
    spec = load_spec(STUDIES / "qwen3-30b-a3b-eagle3.yaml", [])
    args = config_args(tuned_config(spec))
    pairs = {
        a: args[i + 1]
        for i, a in enumerate(args[:-1])
        if a.startswith("--") and not args[i + 1].startswith("--")
    }
    assert pairs["--kv-cache-dtype"] == "fp8_e4m3" and pairs["--gpu-memory-utilization"] == "0.95"
    assert pairs["--max-num-seqs"] == "256" and pairs["--max-num-batched-tokens"] == "16384"
    assert pairs["--max-model-len"] == "8192" and pairs["--attention-backend"] == "FLASHINFER"
    assert "--enable-prefix-caching" in args
    assert spec.stages == ["tune", "speculative"]


def test_gemma_dflash_speculative_stage_switches_to_triton_attention() -> None:
    spec = load_spec(STUDIES / "gemma-4-31b-dflash.yaml", [])
    base = tuned_config(spec)
    trial = optuna.trial.FixedTrial(
        {
            "max_num_seqs": 128,
            "max_num_batched_tokens": 16384,
            "gpu_memory_utilization": 0.95,
            "num_speculative_tokens": 15,
        }
    )
    config = sample(trial, spec, "speculative", base)
    assert config.attention_backend == "TRITON_ATTN"  # the DFlash path needs the Triton backend
    assert config.kv_cache_dtype == "fp8_e4m3" and config.max_model_len == 24576  # the tuned stack kept
    args = config_args(config)
    payload = json.loads(args[args.index("--speculative-config") + 1])
    assert payload == {
        "method": "dflash",
        "num_speculative_tokens": 15,
        "model": "z-lab/gemma-4-31B-it-DFlash",
    }
    assert incompatibilities(config, Facts(device="cuda")) == []


def test_the_speculative_stage_never_samples_none_and_tune_never_samples_a_drafter() -> None:
    spec = load_spec(STUDIES / "tiny-cpu-speculative.yaml", [])
    study = optuna.create_study(directions=["maximize", "minimize"])
    base = tuned_config(spec) or sample(
        optuna.trial.FixedTrial(
            {"max_num_seqs": 8, "max_num_batched_tokens": 2048, "enable_prefix_caching": True}
        ),
        spec,
        "tune",
    )
    for _ in range(12):
        t = study.ask()
        config = sample(t, spec, "speculative", base)
        assert config.speculative is not None and config.speculative.method in (
            "ngram",
            "draft_model",
            "eagle3",
        )
        assert config.enable_prefix_caching == base.enable_prefix_caching
        study.tell(t, [1.0, 1.0])
        t2 = study.ask()
        assert sample(t2, spec, "tune").speculative is None
        study.tell(t2, [1.0, 1.0])


def test_a_speculative_only_staging_needs_a_tuned_configuration() -> None:
    with pytest.raises(SpecError) as e:
        load_spec(STUDIES / "tiny-cpu-speculative.yaml", ["stages=[speculative]", "budget={n_trials: 3}"])
    assert "tuned" in str(e.value)
    spec = load_spec(
        STUDIES / "tiny-cpu-speculative.yaml",
        ["stages=[speculative]", "budget={n_trials: 3}", "tuned.max_num_seqs=8"],
    )
    assert tuned_config(spec).max_num_seqs == 8


def test_every_gpu_example_measures_at_least_three_windows_a_level() -> None:
    """One window a level leaves every verdict at "not enough evidence": GPU examples measure three, or
    explore with fewer and confirm the trials near the front with at least three pairs."""
    from nova_search.analysis.noise import MIN_SAMPLES

    gpu = [p for p in sorted(STUDIES.glob("*.yaml")) if load_spec(p).engine.device == "cuda"]
    assert gpu
    for path in gpu:
        spec = load_spec(path)
        confirmed = spec.confirm is not None and spec.confirm.min_pairs >= MIN_SAMPLES
        assert spec.sweep.repeats >= MIN_SAMPLES or confirmed, path.name


def test_the_h100_capacity_study_searches_capacity_per_gpu_at_a_decidable_slo() -> None:
    spec = load_spec(STUDIES / "experiments" / "h100-qwen3-8b-capacity.yaml", [])
    assert spec.engine.device == "cuda" and spec.capacity is not None and spec.slo is not None
    assert spec.objectives[0].metric == "capacity_per_gpu"
    plan = spec.capacity.plan(spec.closed_loop)
    assert (plan.unit, plan.start, plan.max_probes) == ("concurrency", 32.0, 7)
    # every probe a count of requests (a probe over saturation stops early), enough to decide p90 when
    # every request meets it: Wilson's lower end of 200/200 at 95 % lies above 0.9
    slo = spec.slo.to_slo()
    assert spec.sweep.requests == 200
    assert all(wilson(200, 200, slo.confidence)[0] >= b.threshold for b in slo.bounds)
