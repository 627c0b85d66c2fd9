"""engine.cuda_graphs: sweep sets max_cudagraph_capture_size from the sweep, the same for every trial of a
drafter length, so vLLM's compile cache (its key holds the capture sizes) is not missed because
max_num_seqs moved (measured on the H200: benchmarks/results/boot-times-h200/)."""

from __future__ import annotations

from typing import Any

import optuna
import pytest

from nova_search.engine.command import config_args
from nova_search.errors import SpecError
from nova_search.knobs import EngineConfig, SpeculativeConfig
from nova_search.search.configs import stock_config, sweep_graph_size, with_graph_sizes
from nova_search.spec import StudySpec, parse_spec
from nova_search.testing.specs import minimal_spec_dict
from nova_search.trial.run import choose_config


def gpu_spec(concurrency: list[int], **engine: Any) -> StudySpec:
    raw = minimal_spec_dict(
        sweep={"concurrency": concurrency, "requests": 2},
        space={"max_num_seqs": {"low": 8, "high": 512, "log": True}},
    )
    raw["engine"] = {**raw["engine"], "device": "cuda", **engine}
    return parse_spec(raw)


def drafting(k: int) -> EngineConfig:
    return EngineConfig(speculative=SpeculativeConfig(method="ngram", num_speculative_tokens=k))


@pytest.mark.parametrize(
    ("concurrency", "k", "size"),
    [
        ([1, 16, 64], 0, 64),  # the highest level, in tokens of one decode step
        ([1, 16, 64], 3, 256),  # each sequence verifies 1 + k tokens a step
        ([1, 20], 0, 24),  # up to vLLM's stride of sizes: 8 up to 256
        ([300], 0, 304),  # 16 above 256
        ([1, 256], 3, 512),  # never above vLLM's own cap
        ([2], 0, 2),
    ],
)
def test_the_size_is_the_sweeps_largest_decode_batch(concurrency: list[int], k: int, size: int) -> None:
    spec = gpu_spec(concurrency)
    assert sweep_graph_size(spec, drafting(k) if k else EngineConfig()) == size


def test_every_trial_of_a_stage_gets_the_same_size_whatever_its_max_num_seqs() -> None:
    spec = gpu_spec([1, 32, 128])
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    seen = set()
    for _ in range(8):
        config = choose_config(study.ask(), spec)
        assert config.max_cudagraph_capture_size == 128
        assert "--max-cudagraph-capture-size" in config_args(config)
        seen.add(config.max_num_seqs)
    assert len(seen) > 4  # max_num_seqs did move: the size did not follow it
    assert with_graph_sizes(spec, stock_config(spec)).max_cudagraph_capture_size == 128


def test_a_speculative_trial_on_a_tuned_base_is_sized_for_its_drafter() -> None:
    spec = gpu_spec([1, 64])
    tuned = with_graph_sizes(spec, EngineConfig(max_num_seqs=64))  # sized for k = 0: 64
    assert tuned.max_cudagraph_capture_size == 64
    drafted = with_graph_sizes(spec, drafting(2).with_values(max_num_seqs=64, max_cudagraph_capture_size=64))
    assert drafted.max_cudagraph_capture_size == 192


@pytest.mark.parametrize(
    "change",
    [
        {"cuda_graphs": "vllm"},  # vLLM's own sizes
        {"device": "cpu"},  # no CUDA graphs
        {"extra_args": ["--enforce-eager"]},
        {"extra_args": ["--cudagraph-capture-sizes", "1", "2", "4"]},
        {"extra_args": ["--max-cudagraph-capture-size=32"]},
        {"defaults": {"max_cudagraph_capture_size": 32}},
    ],
)
def test_the_size_is_left_to_the_spec_where_it_says_so(change: dict[str, Any]) -> None:
    spec = gpu_spec([1, 64], **change)
    config = EngineConfig(max_num_seqs=16)
    assert with_graph_sizes(spec, config) == config


def test_a_searched_size_is_the_samplers() -> None:
    raw = minimal_spec_dict(
        sweep={"concurrency": [1, 64], "requests": 2},
        space={"max_cudagraph_capture_size": {"choices": [32, 512]}},
    )
    raw["engine"] = {**raw["engine"], "device": "cuda"}
    spec = parse_spec(raw)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    sizes = {choose_config(study.ask(), spec).max_cudagraph_capture_size for _ in range(12)}
    assert sizes == {32, 512}


def test_an_unknown_policy_is_refused_with_the_choices() -> None:
    with pytest.raises(SpecError) as e:
        gpu_spec([1], cuda_graphs="all")
    assert "cuda_graphs" in str(e.value) and "sweep" in str(e.value) and "vllm" in str(e.value)
