"""nova's sampler after issue 55 (``search.sampler``, ``search.refusals``, ``search.neighbours``): it
never proposes what the compatibility rules refuse (the first trial included; the host's rules once a
worker gives it the facts), it steps from the best once two trials are measured, and a space with a
range runs out of steps."""

from __future__ import annotations

import json

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, IntDistribution

from nova_search.knobs import EngineConfig
from nova_search.results.select import pareto_front
from nova_search.search.configs import sample
from nova_search.search.neighbours import distance, steps
from nova_search.search.rules import Facts, incompatibilities, spec_incompatibilities
from nova_search.search.sampler import FittingSampler, NovaSampler, make_sampler, use_facts
from nova_search.spec import parse_spec
from nova_search.testing.specs import minimal_spec_dict


def _spec(space: dict, seed: int = 0, device: str = "cpu", objectives: list | None = None):
    raw = minimal_spec_dict(space=space, sampler={"name": "tpe", "seed": seed})
    raw["engine"]["device"] = device
    raw["engine"]["defaults"] = {"max_model_len": 2048}
    if objectives:
        raw["objectives"] = objectives
    return parse_spec(raw)


#: 18 configurations, 6 of them refused before launch (chunked prefill off, a budget below 2048)
RULED = {
    "max_num_seqs": {"choices": [4, 8, 16]},
    "max_num_batched_tokens": {"choices": [512, 1024, 4096]},
    "enable_chunked_prefill": {"choices": [True, False]},
}


def _throughput(p: dict) -> float:
    return (
        p["max_num_seqs"] * (1.1 if p.get("enable_chunked_prefill") else 1.0)
        + p["max_num_batched_tokens"] / 1024
    )


def _run(study: optuna.Study, spec, n: int, facts: Facts | None = None) -> list[EngineConfig]:
    configs = []
    for _ in range(n):
        trial = study.ask()
        config = sample(trial, spec, "tune")
        configs.append(config)
        if incompatibilities(config, facts or Facts(model_max_len=2048)):
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        else:
            study.tell(trial, _throughput(trial.params))
    return configs


@pytest.mark.parametrize("seed", range(6))
def test_no_configuration_the_rules_refuse_is_proposed_the_first_trial_included(seed: int) -> None:
    spec = _spec(RULED, seed)
    study = optuna.create_study(direction="maximize", sampler=make_sampler(spec))
    configs = _run(study, spec, 12)
    assert not [c for c in configs if incompatibilities(c, Facts(model_max_len=2048))]
    assert len({json.dumps(t.params, sort_keys=True) for t in study.trials}) == 12  # no repeat either


def test_with_the_hosts_facts_an_fp8_cache_on_a_cpu_without_avx512_is_not_proposed() -> None:
    space = {"kv_cache_dtype": {"choices": ["auto", "fp8"]}, "max_num_seqs": {"choices": [4, 8, 16]}}
    host = Facts(device="cpu", cpu_flags=frozenset({"avx2"}), model_max_len=2048)
    drawn = {"spec": set(), "host": set()}
    for seed in range(4):
        for who in drawn:
            spec = _spec(space, seed)
            study = optuna.create_study(direction="maximize", sampler=make_sampler(spec))
            if who == "host":
                use_facts(study.sampler, host)
            for _ in range(3):
                trial = study.ask()
                config = sample(trial, spec, "tune")
                drawn[who].add(config.kv_cache_dtype)
                study.tell(trial, float(config.max_num_seqs or 0))
    assert drawn["host"] == {"auto"}  # the host's rules: fp8 refused on this CPU
    assert "fp8" in drawn["spec"]  # the spec alone does not know the CPU: nothing refused


def test_the_rules_without_facts_are_those_the_spec_alone_decides() -> None:
    refused = EngineConfig(max_model_len=2048, enable_chunked_prefill=False, max_num_batched_tokens=512)
    assert [p.split(":")[0] for p in spec_incompatibilities(refused)] == ["chunked_prefill_budget"]
    fp8 = EngineConfig(kv_cache_dtype="fp8")  # refused on a CPU without AVX-512: a fact of the host
    assert spec_incompatibilities(fp8) == [] and incompatibilities(fp8, Facts(device="cpu"))


def test_use_facts_reaches_nova_inside_the_slot_wrapper() -> None:
    spec = _spec(RULED)
    nova = make_sampler(spec)
    assert isinstance(nova, NovaSampler) and nova.rules is not None and nova.rules.facts is None
    facts = Facts(device="cuda", model_max_len=4096)
    use_facts(FittingSampler(nova, (1,)), facts)
    assert nova.rules.facts is facts


@pytest.mark.parametrize("seed", range(4))
def test_once_two_trials_are_measured_each_trial_is_one_step_from_the_best(seed: int) -> None:
    space = {
        "max_num_seqs": {"choices": [4, 8, 16, 32, 64]},
        "max_num_batched_tokens": {"choices": [2048, 4096, 8192]},
        "enable_prefix_caching": {"choices": [True, False]},
    }
    spec = _spec(space, seed)
    study = optuna.create_study(direction="maximize", sampler=make_sampler(spec))

    def value(p: dict) -> float:  # one hill: the top at 32 sequences, 4096 tokens, prefix caching
        return (
            -abs(p["max_num_seqs"] - 32)
            - abs(p["max_num_batched_tokens"] - 4096) / 1024
            + p["enable_prefix_caching"]
        )

    dists = {
        "max_num_seqs": CategoricalDistribution([4, 8, 16, 32, 64]),
        "max_num_batched_tokens": CategoricalDistribution([2048, 4096, 8192]),
        "enable_prefix_caching": CategoricalDistribution([True, False]),
    }
    stepped = 0
    for _ in range(14):
        done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
        trial = study.ask()
        sample(trial, spec, "tune")
        if len(done) >= 2:
            best = max(done, key=lambda t: t.value)
            one_step = [json.dumps(s, sort_keys=True) for s in steps(best.params, best.params, dists)]
            held = {json.dumps(t.params, sort_keys=True) for t in done}
            if set(one_step) - held:  # a new step exists: the trial is one of them
                assert json.dumps(trial.params, sort_keys=True) in one_step
                stepped += 1
        study.tell(trial, value(trial.params))
    assert stepped >= 6
    assert study.best_trial.params == {
        "max_num_seqs": 32,
        "max_num_batched_tokens": 4096,
        "enable_prefix_caching": True,
    }


def test_steps_move_one_list_by_one_rank_and_keep_a_ranges_value() -> None:
    dists = {
        "max_num_seqs": CategoricalDistribution([8, 16, 32]),
        "kv_cache_dtype": CategoricalDistribution(["auto", "fp8", "fp8_e5m2"]),
        "max_num_batched_tokens": IntDistribution(1024, 8192, log=True),
    }
    at = {"max_num_seqs": 8, "kv_cache_dtype": "fp8", "max_num_batched_tokens": 2048}
    centre = {**at, "max_num_batched_tokens": 5000}
    got = steps(centre, at, dists)
    assert {json.dumps(s, sort_keys=True) for s in got} == {
        json.dumps({**centre, **change}, sort_keys=True)
        for change in ({"max_num_seqs": 16}, {"kv_cache_dtype": "auto"}, {"kv_cache_dtype": "fp8_e5m2"})
    }
    assert distance(got[0], centre, dists) == pytest.approx(0.5)  # one rank of three


def test_of_two_objectives_the_front_is_the_trials_none_dominates() -> None:
    study = optuna.create_study(directions=["maximize", "minimize"])
    for values in ((10, 5), (8, 2), (7, 6), (10, 5)):
        study.add_trial(optuna.trial.create_trial(values=list(values)))
    # the sampler steps from this front of Optuna's own trials (search.sampler)
    front = pareto_front(study.trials, ["maximize", "minimize"])
    assert sorted(t.values for t in front) == [[8, 2], [10, 5], [10, 5]]


@pytest.mark.parametrize("seed", range(3))
def test_a_space_with_a_range_runs_out_of_steps_and_a_two_objective_study_draws_no_repeat(seed: int) -> None:
    """With a range, every step is new by the range's value alone: a step counts as new only in its
    lists, so a study meets every list combination, never stepping round one best for ever."""
    space = {
        "max_num_seqs": {"low": 4, "high": 64, "log": True},
        "kv_cache_dtype": {"choices": ["auto", "fp8"]},
        "enable_prefix_caching": {"choices": [True, False]},
    }
    objectives = [
        {"metric": "output_throughput", "direction": "maximize"},
        {"metric": "ttft_p99_ms", "direction": "minimize"},
    ]
    spec = _spec(space, seed, device="cuda", objectives=objectives)
    study = optuna.create_study(directions=["maximize", "minimize"], sampler=make_sampler(spec))
    for _ in range(12):
        trial = study.ask()
        sample(trial, spec, "tune")
        p = trial.params
        fast = p["max_num_seqs"] * (1.2 if p["kv_cache_dtype"] == "fp8" else 1.0)
        study.tell(trial, [fast, p["max_num_seqs"] / (2.0 if p["enable_prefix_caching"] else 1.0)])
    lists = {(t.params["kv_cache_dtype"], t.params["enable_prefix_caching"]) for t in study.trials}
    assert len(lists) == 4
