"""tensor_parallel_size as a searched knob: the spec, the worker's slots (placement), the sampler that
keeps it inside a worker's GPUs, the compatibility rules and the memory estimate it reaches."""

from __future__ import annotations

import itertools
import json
from typing import Any

import optuna
import pytest

from nova_search import schema
from nova_search.engine.command import build_launch
from nova_search.engine.memory import ModelShape
from nova_search.errors import SpecError
from nova_search.knobs import EngineConfig
from nova_search.search.configs import sample
from nova_search.search.host import host_facts
from nova_search.search.placement import NoSlot, place, queued_gpus, sampled_tp, server_gpus, tp_values
from nova_search.search.rules import Facts, incompatibilities
from nova_search.search.sampler import FittingSampler, make_sampler
from nova_search.spec import StudySpec, parse_spec
from nova_search.testing.specs import fake_spec_dict
from tests.support import REPO

QWEN3_8B = json.loads((REPO / "benchmarks" / "gpu" / "qwen3-8b-config.json").read_text())
H200 = 143771 * 1024 * 1024


def tp_spec(tp: Any = None, **engine: Any) -> StudySpec:
    raw = fake_spec_dict(10)
    if tp is not None:
        raw["space"]["tensor_parallel_size"] = tp
    raw["engine"].update(engine)
    return parse_spec(raw)


# ---------------------------------------------------------------- the spec


def test_the_space_searches_tensor_parallel_size_and_checks_its_bounds() -> None:
    assert sampled_tp(tp_spec({"choices": [2, 1]})) == (1, 2)
    assert sampled_tp(tp_spec({"low": 1, "high": 4})) == (1, 2, 3, 4)
    assert sampled_tp(tp_spec(2)) == (2,)
    assert sampled_tp(tp_spec(tensor_parallel_size=4)) == (4,)  # not searched: the engine's
    with pytest.raises(
        SpecError, match=r"space.*tensor_parallel_size.choices.1: tensor_parallel_size must be >= 1"
    ):
        tp_spec({"choices": [1, 0]})
    raw = fake_spec_dict(1)
    raw["engine"]["tensor_parallel_size"] = 2
    raw["engine"]["defaults"] = {"tensor_parallel_size": 2}
    with pytest.raises(
        SpecError, match="engine.tensor_parallel_size or engine.defaults.tensor_parallel_size"
    ):
        parse_spec(raw)


def test_a_sampled_tensor_parallel_size_reaches_the_argv_and_the_server_gets_the_first_gpus_of_its_slot() -> (
    None
):
    spec = tp_spec({"choices": [1, 2]})
    params = {
        "max_num_seqs": 8,
        "enable_prefix_caching": True,
        "tensor_parallel_size": 2,
        "spec_method": "none",
    }
    config = sample(optuna.trial.FixedTrial(params), spec)
    assert config.tensor_parallel_size == 2 and config.gpus == 2
    gpus = server_gpus((4, 5), config)
    plan = build_launch(spec.engine, spec.model, config, port=1, api_key="k", gpus=gpus)
    assert plan.env["CUDA_VISIBLE_DEVICES"] == "4,5"
    i = plan.argv.index("--tensor-parallel-size")
    assert plan.argv[i + 1] == "2"
    assert server_gpus((4, 5), config.with_values(tensor_parallel_size=None)) == (4,)


# ---------------------------------------------------------------- slots


def test_a_fixed_tensor_parallel_size_splits_the_gpus_into_groups_of_it() -> None:
    spec = tp_spec(tensor_parallel_size=2)
    assert place((), spec).slots == ((),)
    assert place((0, 1, 2, 3), spec).slots == ((0, 1), (2, 3))
    assert place((0, 1, 2), spec).slots == ((0, 1),)
    with pytest.raises(
        NoSlot, match=r"--gpus 0: .*tensor_parallel_size 2 .*needs at least 2 GPUs; this one has 1"
    ):
        place((0,), spec)
    with pytest.raises(SpecError, match="listed twice"):
        place((0, 0), tp_spec())


def test_a_searched_tensor_parallel_size_makes_slots_of_the_largest_size_that_fits() -> None:
    spec = tp_spec({"choices": [1, 2]})
    one = place((3,), spec)
    assert (one.slots, one.size, one.fitting) == (((3,),), 1, (1,))  # draws TP 1 only
    two = place((0, 1), spec)
    assert (two.slots, two.size, two.fitting) == (((0, 1),), 2, None)  # one slot: TP 1 or 2, one at a time
    four = place((0, 1, 2, 3), spec)
    assert four.slots == ((0, 1), (2, 3))
    partial = place((0, 1), tp_spec({"choices": [1, 2, 4]}))
    assert (partial.size, partial.fitting) == (2, (1, 2))
    with pytest.raises(NoSlot, match="tensor_parallel_size 2 or 4"):
        place((0,), tp_spec({"choices": [2, 4]}))


@pytest.mark.parametrize("n_gpus", [1, 2, 3, 4, 5, 8])
@pytest.mark.parametrize("choices", [[1], [2], [1, 2], [1, 2, 4], [2, 4, 8], [1, 3]])
def test_every_gpu_is_in_at_most_one_slot_and_every_server_stays_inside_its_slot(n_gpus, choices) -> None:
    spec = tp_spec({"choices": choices} if len(choices) > 1 else choices[0])
    gpus = tuple(range(10, 10 + n_gpus))
    try:
        p = place(gpus, spec)
    except NoSlot:
        assert min(choices) > n_gpus
        return
    used = list(itertools.chain.from_iterable(p.slots))
    assert len(used) == len(set(used)) and set(used) <= set(gpus)
    for slot, tp in itertools.product(p.slots, choices):
        if p.fits(tp):
            got = server_gpus(slot, EngineConfig(tensor_parallel_size=tp))
            assert len(got) == tp and set(got) <= set(slot)


def test_the_baselines_count_among_the_sizes_a_stage_launches() -> None:
    raw = fake_spec_dict(4, baselines=["stock"])
    raw["engine"]["tensor_parallel_size"] = 2
    raw["space"]["tensor_parallel_size"] = 1
    spec = parse_spec(raw)
    assert tp_values(spec) == (1, 2)
    assert place((0, 1), spec).slots == ((0, 1),)  # the stock baseline needs both
    assert place((0,), spec).slots == ((0,),)  # draws TP 1; the stock trial waits for a worker with 2


def test_what_a_queued_trial_needs_is_known_before_it_runs() -> None:
    spec = tp_spec({"choices": [1, 2]}, tensor_parallel_size=2)

    def queued(params=None, user_attrs=None, system_attrs=None) -> optuna.trial.FrozenTrial:
        dist = optuna.distributions.CategoricalDistribution([1, 2])
        return optuna.trial.create_trial(
            state=optuna.trial.TrialState.WAITING,
            params=params or {},
            distributions={k: dist for k in params or {}},
            user_attrs=user_attrs or {},
            system_attrs=system_attrs or {},
        )

    assert queued_gpus(queued(), spec) is None  # drawn when it runs
    assert queued_gpus(queued(params={"tensor_parallel_size": 2}), spec) == 2  # a retry
    assert queued_gpus(queued(system_attrs={"fixed_params": {"tensor_parallel_size": 1}}), spec) == 1
    assert queued_gpus(queued(user_attrs=schema.ROLE.item("stock")), spec) == 2
    base = EngineConfig(tensor_parallel_size=2)
    assert queued_gpus(queued(), spec, "speculative", base) == 2
    assert queued_gpus(queued(user_attrs=schema.ROLE.item("tuned")), spec, "speculative", base) == 2


# ---------------------------------------------------------------- the sampler


def _draw(study: optuna.Study, spec: StudySpec, n: int) -> list[int]:
    out = []
    for _ in range(n):
        trial = study.ask()
        config = sample(trial, spec)
        study.tell(trial, [float(config.gpus) * (trial.params["max_num_seqs"] % 7), 1.0])
        out.append(config.gpus)
    return out


def test_a_worker_draws_only_the_sizes_that_fit_and_every_trial_keeps_the_studys_distribution() -> None:
    spec = tp_spec({"choices": [1, 2, 4]})
    study = optuna.create_study(directions=["maximize", "minimize"], sampler=make_sampler(spec))
    free = _draw(study, spec, 12)  # a worker that holds 4 GPUs: any size
    assert set(free) > {1}
    study.sampler = FittingSampler(make_sampler(spec), (1,))  # a 1-GPU worker
    assert _draw(study, spec, 8) == [1] * 8
    study.sampler = FittingSampler(make_sampler(spec), (1, 2))  # a 2-GPU worker
    pair = _draw(study, spec, 16)
    assert set(pair) == {1, 2}
    dists = {repr(t.distributions["tensor_parallel_size"]) for t in study.trials}
    assert len(dists) == 1  # one distribution: the sampler learns from every worker's trials


# ---------------------------------------------------------------- the compatibility table


def test_tensor_parallelism_must_divide_the_heads_and_fit_the_workers_gpus() -> None:
    facts = Facts(device="cuda", model_heads=32, model_kv_heads=8, gpu_count=4)
    assert incompatibilities(EngineConfig(tensor_parallel_size=4), facts) == []
    assert (
        incompatibilities(EngineConfig(tensor_parallel_size=8), Facts(model_heads=32, model_kv_heads=8)) == []
    )
    (why,) = incompatibilities(EngineConfig(tensor_parallel_size=3), facts)
    assert why.startswith(
        "tensor_parallel_divides_heads: tensor_parallel_size 3 does not divide the model's 32"
    )
    # fewer KV heads than GPUs: replicated when they divide TP (vLLM), refused when they do not
    assert (
        incompatibilities(EngineConfig(tensor_parallel_size=4), Facts(model_heads=32, model_kv_heads=2)) == []
    )
    (why,) = incompatibilities(EngineConfig(tensor_parallel_size=4), Facts(model_heads=36, model_kv_heads=6))
    assert why.startswith("tensor_parallel_divides_heads:") and "6 KV heads" in why
    (why,) = incompatibilities(EngineConfig(tensor_parallel_size=8), facts)
    assert why == (
        "tensor_parallel_fits_gpus: tensor_parallel_size 8 needs 8 GPUs; "
        "a trial on this worker has 4 (--gpus)"
    )
    assert incompatibilities(EngineConfig(tensor_parallel_size=8), Facts(model_heads=32)) == []  # no --gpus


def test_the_heads_come_from_config_json(tiny_raw, tmp_path) -> None:
    (tmp_path / "config.json").write_text(
        json.dumps({"text_config": {"num_attention_heads": 40, "num_key_value_heads": 8}})
    )
    tiny_raw["model"]["path"] = str(tmp_path)
    facts = host_facts(parse_spec(tiny_raw), (0, 1))
    assert (facts.model_heads, facts.model_kv_heads, facts.gpu_count) == (40, 8, 2)
    assert host_facts(parse_spec(tiny_raw)).gpu_count is None


def test_the_sampled_tensor_parallel_size_reaches_the_memory_estimate() -> None:
    spec = tp_spec({"choices": [1, 2]})
    facts = Facts(
        device="cuda", model_max_len=40960, model_shape=ModelShape.of(QWEN3_8B), device_memory_bytes=H200
    )
    params = {"max_num_seqs": 8, "enable_prefix_caching": True, "spec_method": "none"}
    one, two = (
        sample(optuna.trial.FixedTrial({**params, "tensor_parallel_size": tp}), spec).with_values(
            gpu_memory_utilization=0.15
        )
        for tp in (1, 2)
    )
    (why,) = incompatibilities(one, facts)  # 15.26 GiB of weights leave too little of 21 GiB
    assert why.startswith("memory_estimate:")
    assert incompatibilities(two, facts) == []  # half the weights and half the KV a GPU
