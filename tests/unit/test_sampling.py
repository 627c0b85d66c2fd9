"""nova's sampler never proposes a configuration the study already has (sampling.NovaSampler), on
the spec's own space through ``space.sample``, as a worker draws it."""

from __future__ import annotations

import importlib.util
import itertools
import json

import optuna
import pytest
from optuna.distributions import CategoricalDistribution

from nova_search.errors import SpecError
from nova_search.search.configs import sample
from nova_search.search.sampler import NovaSampler, PerTrialSeed, make_sampler, repeats
from nova_search.spec import parse_spec
from nova_search.testing.specs import minimal_spec_dict


def _spec(sampler: str = "tpe", seed: int = 0):
    raw = minimal_spec_dict()
    raw["space"] = {
        "max_num_seqs": {"choices": [4, 8, 16]},
        "enable_prefix_caching": {"choices": [True, False]},
        "kv_cache_dtype": {"choices": ["auto", "fp8"]},
    }  # 12 configurations
    raw["sampler"] = {"name": sampler, "seed": seed}
    return parse_spec(raw)


def _landscape(params: dict) -> float:
    """One clear best (16, True, auto) and a slope towards it, as a throughput."""
    return (
        params["max_num_seqs"]
        * (1.2 if params["enable_prefix_caching"] else 1.0)
        * (1.1 if params["kv_cache_dtype"] == "auto" else 1.0)
    )


def _run(study: optuna.Study, spec, n: int) -> list[str]:
    seen = []
    for _ in range(n):
        trial = study.ask()
        sample(trial, spec, "tune")
        seen.append(json.dumps(trial.params, sort_keys=True))
        study.tell(trial, _landscape(trial.params))
    return seen


@pytest.mark.parametrize("seed", range(5))
def test_nova_tpe_measures_every_configuration_once_before_it_repeats_one(seed: int) -> None:
    spec = _spec(seed=seed)
    study = optuna.create_study(direction="maximize", sampler=make_sampler(spec))
    seen = _run(study, spec, 12)
    assert len(set(seen)) == 12  # the whole space, no repeat (start-up draws included)
    # measured through: the 13th proposal has to repeat one, and it does rather than loop
    (extra,) = _run(study, spec, 1)
    assert extra in seen


def test_the_same_tpe_without_it_repeats_configurations_it_has() -> None:
    """What NovaSampler is for: the TPE settings it wraps, alone, on the same space."""
    spec = _spec()
    repeated = 0
    for seed in range(5):
        tpe = optuna.samplers.TPESampler(
            multivariate=True, group=True, constant_liar=True, seed=seed, n_startup_trials=4
        )
        seen = _run(optuna.create_study(direction="maximize", sampler=tpe), spec, 12)
        repeated += 12 - len(set(seen))
    assert repeated >= 5


def test_a_configuration_being_measured_by_another_worker_is_not_proposed_again() -> None:
    spec = _spec()
    study = optuna.create_study(direction="maximize", sampler=make_sampler(spec))
    _run(study, spec, 6)
    running = []
    for _ in range(6):  # six workers ask at once; none has told yet
        trial = study.ask()
        sample(trial, spec, "tune")
        running.append(json.dumps(trial.params, sort_keys=True))
    done = {json.dumps(t.params, sort_keys=True) for t in study.trials if t.state.is_finished()}
    assert len(set(running)) == 6 and not set(running) & done


@pytest.mark.parametrize("seed", range(3))
def test_a_queued_trials_fixed_values_count_when_its_other_values_are_drawn(seed: int) -> None:
    """A retry of a trial whose worker died mid-draw is queued with the part it had drawn. The rest is
    drawn so that the whole, fixed values included, is new: judged without them, a proposal of
    (4, True, auto) passed the rule and ran as (16, True, auto), a configuration already measured."""
    spec = _spec(seed=seed)
    study = optuna.create_study(direction="maximize", sampler=make_sampler(spec))
    unmeasured = [(4, True, "auto"), (16, False, "fp8")]
    dists = {
        "max_num_seqs": CategoricalDistribution([4, 8, 16]),
        "enable_prefix_caching": CategoricalDistribution([True, False]),
        "kv_cache_dtype": CategoricalDistribution(["auto", "fp8"]),
    }
    for m, caching, dtype in itertools.product((4, 8, 16), (True, False), ("auto", "fp8")):
        if (m, caching, dtype) not in unmeasured:
            params = {"max_num_seqs": m, "enable_prefix_caching": caching, "kv_cache_dtype": dtype}
            study.add_trial(
                optuna.trial.create_trial(params=params, distributions=dists, value=_landscape(params))
            )
    study.enqueue_trial({"max_num_seqs": 16})
    trial = study.ask()
    sample(trial, spec, "tune")
    assert trial.params == {"max_num_seqs": 16, "enable_prefix_caching": False, "kv_cache_dtype": "fp8"}


def test_a_repeat_is_every_parameter_of_an_earlier_trial_with_the_same_value() -> None:
    study = optuna.create_study()
    study.add_trial(
        optuna.trial.create_trial(
            params={"spec_method": "none", "max_num_seqs": 8},
            distributions={
                "spec_method": optuna.distributions.CategoricalDistribution(["none", "ngram"]),
                "max_num_seqs": optuna.distributions.IntDistribution(4, 16),
            },
            value=1.0,
        )
    )
    trials = study.trials
    # the drafter's options drawn with "none" are not part of that configuration: the same one
    assert repeats({"spec_method": "none", "max_num_seqs": 8, "num_speculative_tokens": 3}, trials)
    assert repeats({"spec_method": "ngram", "max_num_seqs": 8, "num_speculative_tokens": 3}, trials) is None
    assert repeats({"spec_method": "none", "max_num_seqs": 16}, trials) is None


def test_random_and_nsga2_are_only_seeded_per_trial_and_tpe_and_gp_are_wrapped() -> None:
    assert isinstance(make_sampler(_spec("tpe")), NovaSampler)
    if all(importlib.util.find_spec(m) is not None for m in ("torch", "scipy")):
        assert isinstance(make_sampler(_spec("gp")), NovaSampler)
    else:  # Optuna's GPSampler needs PyTorch and SciPy, not dependencies of nova: a clear error, not a
        # crash at the first draw
        with pytest.raises(SpecError, match=r"sampler.name: gp needs PyTorch.*use tpe, nsga2 or random"):
            make_sampler(_spec("gp"))
    # random and nsga2: only seeded per trial (issue 40), no other change
    for name, kind in (("random", optuna.samplers.RandomSampler), ("nsga2", optuna.samplers.NSGAIISampler)):
        sampler = make_sampler(_spec(name))
        assert type(sampler) is PerTrialSeed and isinstance(sampler.base, kind)


def test_the_base_sampler_sees_a_list_of_numbers_as_ranks_and_the_study_keeps_the_values() -> None:
    seen: list[dict] = []

    class Recorder(optuna.samplers.RandomSampler):
        def sample_independent(self, study, trial, name, distribution):
            seen.append({"name": name, "distribution": distribution, "others": study.trials})
            return super().sample_independent(study, trial, name, distribution)

    spec = _spec()
    study = optuna.create_study(direction="maximize", sampler=NovaSampler(Recorder(seed=0), seed=0))
    _run(study, spec, 3)
    seqs = [s for s in seen if s["name"] == "max_num_seqs"]
    assert seqs and all(s["distribution"] == optuna.distributions.IntDistribution(0, 2) for s in seqs)
    # two choices and strings stay categorical
    flags = [s for s in seen if s["name"] == "enable_prefix_caching"]
    assert all(isinstance(s["distribution"], optuna.distributions.CategoricalDistribution) for s in flags)
    last = [t for t in seqs[-1]["others"] if t.state.is_finished()]
    assert last and {t.params["max_num_seqs"] for t in last} <= {0, 1, 2}  # ranks in the view
    assert {t.params["max_num_seqs"] for t in study.trials} <= {4, 8, 16}  # values in the study
    assert all(t.params["max_num_seqs"] in (4, 8, 16) for t in study.trials)


@pytest.mark.recorded
def test_the_committed_replay_meets_the_goal_and_its_first_seeds_replay_the_same() -> None:
    """benchmarks/results/sampler-replay-cpu: nova's TPE needs at most half of random search's trials
    to reach a configuration within 5 % of the best, on the measured table; replaying the first seeds
    from the committed table gives the committed counts (the samplers are seeded)."""
    from tests.support.scripts import benchmark_script

    replay = benchmark_script("sampler_replay.py")

    summary = json.loads((replay.RESULTS / "summary.json").read_text())
    assert summary["seeds"] >= 20 and summary["table"]["passes"] >= 2
    assert summary["tpe"]["median_trials"] <= summary["random"]["median_trials"] / 2
    assert summary["tpe"]["not_found"] == 0 and summary["tpe"]["median_repeats"] == 0
    rows = replay.read_table(replay.RESULTS / "table.jsonl")
    land = replay.landscape(rows)
    spec = replay.load_spec(replay.SPEC)
    assert len(land) == len(replay.grid_params(spec)) == summary["table"]["configurations"]
    assert all(len(e["figures"]) >= 2 for e in land.values() if e["launchable"])
    best = max(e["mean"] for e in land.values() if e["mean"] is not None)
    assert round(best, 1) == summary["table"]["best_mean_output_tok_s"]
    samplers = replay.make_samplers(spec)
    for name in ("tpe", "random"):
        make, refused_as = samplers[name]
        counts = [
            replay.replay_one(
                spec, land, make(seed), None, best * (1 - summary["table"]["within"]), 48, refused_as
            )["trials"]
            for seed in range(5)
        ]
        assert counts == summary[name]["trials"][:5]


def test_workers_sharing_a_seed_draw_apart_and_one_worker_draws_the_same_again() -> None:
    """Issue 40, finding 3: two workers (two samplers of one seed on one study) each ask a trial before
    either completes: their start-up draws differ (a trial's draws are seeded by its number, and a
    value that would repeat a RUNNING trial is drawn again). One worker, run twice, draws the same."""
    spec = _spec(seed=0)
    study = optuna.create_study(direction="maximize", sampler=make_sampler(spec))
    other = optuna.load_study(study_name=study.study_name, storage=study._storage, sampler=make_sampler(spec))
    running = []
    for s in (study, other, study, other):
        trial = s.ask()
        sample(trial, spec, "tune")
        running.append(json.dumps(trial.params, sort_keys=True))
    assert len(set(running)) == 4, running  # all RUNNING, none repeated
    again = [
        _run(optuna.create_study(direction="maximize", sampler=make_sampler(spec)), spec, 6) for _ in "ab"
    ]
    assert again[0] == again[1]  # an explicit seed: reproducible


@pytest.mark.parametrize("name", ["random", "nsga2"])
def test_random_and_nsga2_workers_sharing_a_seed_draw_apart(name: str) -> None:
    spec = _spec(name, seed=0)
    study = optuna.create_study(direction="maximize", sampler=make_sampler(spec))
    other = optuna.load_study(study_name=study.study_name, storage=study._storage, sampler=make_sampler(spec))
    drawn: dict[int, list[dict]] = {0: [], 1: []}
    for i, s in enumerate((study, other, study, other)):
        trial = s.ask()
        sample(trial, spec, "tune")
        drawn[i % 2].append(trial.params)
    assert drawn[0] != drawn[1]  # one seed, yet not the same sequence (no no-repeat rule here)
