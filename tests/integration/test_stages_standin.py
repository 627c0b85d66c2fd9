"""Stages on the fast stand-in engine (launched by nova-search exactly as vLLM is): a staged study is
named once, its stages are Optuna studies linked by attributes, a worker follows them, and every
command that takes STUDY accepts the one name."""

from __future__ import annotations

import json

import optuna
import yaml

from nova_search import schema
from nova_search.db import open_storage
from nova_search.results.load import load_results
from nova_search.results.select import tuned_baseline
from nova_search.search import lifecycle as nova_study
from nova_search.spec import load_spec
from nova_search.testing.specs import minimal_spec_dict
from tests.support.cli import nova


def staged_spec_file(tmp_path, **changes) -> str:
    raw = minimal_spec_dict(
        name="staged",
        stages=["tune", "speculative"],
        space={
            "max_num_seqs": {"low": 2, "high": 64, "log": True},
            "enable_prefix_caching": {"choices": [True, False]},
            "speculative": {
                "method": {"choices": ["ngram", "draft_model"]},
                "num_speculative_tokens": {"low": 2, "high": 4},
                "prompt_lookup_min": 2,
                "prompt_lookup_max": 3,
                "drafters": {"draft_model": "fake-drafter"},
            },
        },
        sweep={"concurrency": [1, 2], "requests": 4, "warmup_requests": 1, "repeats": 3},
        objectives=[
            {"metric": "output_throughput", "direction": "maximize"},
            {"metric": "ttft_p99_ms", "direction": "minimize", "at": 2},
        ],
        budget={"n_trials": 2, "per_stage": {"tune": 2, "speculative": 3}},
    )
    raw.update(changes)
    path = tmp_path / "staged.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def test_a_staged_study_runs_both_stages_and_every_command_takes_its_name(tmp_path):
    url = f"sqlite:///{tmp_path}/s.db"
    spec = staged_spec_file(tmp_path)
    r = nova("run", spec, "--storage", url, "--artifacts-dir", str(tmp_path / "art"))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]

    names = optuna.study.get_all_study_names(url)
    assert sorted(names) == ["staged.speculative", "staged.tune"]
    tune = optuna.load_study(study_name="staged.tune", storage=url)
    spec_study = optuna.load_study(study_name="staged.speculative", storage=url)
    assert tune.user_attrs[schema.STAGE.key] == "tune" and tune.user_attrs[schema.PARENT.key] == "staged"
    assert spec_study.user_attrs[schema.STAGE.key] == "speculative"

    t_trials = tune.get_trials()
    assert len(t_trials) == 2 and t_trials[0].user_attrs[schema.ROLE.key] == "stock"
    assert all(t.user_attrs[schema.CONFIG.key]["speculative"] is None for t in t_trials)  # tune: no drafter

    base = spec_study.user_attrs[schema.BASE.key]
    best = tuned_baseline(load_results("staged.tune", url))  # the one definition every reader uses
    assert base["study"] == "staged.tune" and base["number"] == best.number
    s_trials = spec_study.get_trials()
    assert len(s_trials) == 3
    tuned = s_trials[0]
    assert tuned.user_attrs[schema.ROLE.key] == "tuned"
    assert tuned.user_attrs[schema.CONFIG.key] == base["config"]  # the tuned stack, measured again
    methods = [t.user_attrs[schema.CONFIG.key]["speculative"]["method"] for t in s_trials[1:]]
    assert methods == ["ngram", "draft_model"]  # every drafter once, before the sampler takes over
    for t in s_trials[1:]:
        cfg = t.user_attrs[schema.CONFIG.key]
        # the tuned stack is kept; only the limits that interact with drafting are searched again
        assert cfg["enable_prefix_caching"] == base["config"]["enable_prefix_caching"]

    # policy by the one name: JSON carries per range the bounds, trial, argv and gain with interval
    p = nova("policy", "staged", "--storage", url, "--format", "json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["study"] == "staged" and doc["tuned"] == "speculative#0"
    assert doc["policy"][0]["min_concurrency"] == 1 and doc["policy"][-1]["max_concurrency"] is None
    for rng in doc["policy"]:
        assert rng["argv"] and rng["trial"] and "gain_pct" in rng and "ci_low" in rng
    assert {d["method"] for d in doc["drafters"]} == {"ngram", "draft_model"}
    for d in doc["drafters"]:
        assert d["status"] in ("accepted", "rejected") and len(d["per_level"]) == 2
        assert all(g["n_tuned"] == 3 and g["n_candidate"] == 3 for g in d["per_level"])
    table = nova("policy", "staged", "--storage", url)
    assert table.returncode == 0 and "Deployment policy" in table.stdout
    y = nova("policy", "staged", "--storage", url, "--format", "yaml")
    assert y.returncode == 0 and yaml.safe_load(y.stdout)["study"] == "staged"

    best_json = nova("best", "staged", "--storage", url, "--format", "json")
    assert best_json.returncode == 0, best_json.stderr
    keys = {t["key"] for t in json.loads(best_json.stdout)["trials"]}
    assert keys and all(k.startswith(("tune#", "speculative#")) for k in keys)
    for cmd in (
        ("status", "staged"),
        ("dump", "staged"),
        ("report", "staged", "-o", str(tmp_path / "r.html")),
    ):
        out = nova(*cmd, "--storage", url)
        assert out.returncode == 0, (cmd, out.stderr[-1500:])
    dumped = json.loads(nova("dump", "staged", "--storage", url).stdout)
    assert len(dumped["trials"]) == 5 and {t["stage"] for t in dumped["trials"]} == {"tune", "speculative"}

    # the worker by the one name: the budget of both stages is spent, nothing more runs
    w = nova("worker", "staged", "--storage", url, "--artifacts-dir", str(tmp_path / "art"))
    assert w.returncode == 0, w.stderr
    assert len(optuna.load_study(study_name="staged.speculative", storage=url).get_trials()) == 3


def test_bad_stagings_are_refused_naming_the_field(tmp_path):
    r = nova("validate", staged_spec_file(tmp_path, stages=["speculative"]))
    assert r.returncode == 2 and "stages" in r.stderr and "(tune, speculative)" in r.stderr
    no_drafter = staged_spec_file(tmp_path)
    raw = yaml.safe_load(open(no_drafter))
    raw["space"]["speculative"] = {"method": "none"}
    open(no_drafter, "w").write(yaml.safe_dump(raw))
    r = nova("validate", no_drafter)
    assert r.returncode == 2 and "speculative stage needs space.speculative.method" in r.stderr
    r = nova(
        "validate", staged_spec_file(tmp_path, stages=["tune"]), "--set", "budget.per_stage.speculative=3"
    )
    assert r.returncode == 2 and "budget.per_stage" in r.stderr


def test_the_speculative_stage_waits_for_the_tune_stage(tmp_path):
    """A second worker that finds stage one still running does not start stage two early."""
    url = f"sqlite:///{tmp_path}/s.db"
    spec_path = staged_spec_file(tmp_path)
    spec = load_spec(spec_path)
    study = nova_study.create(spec, url, "staged")
    trial = study.ask()  # a trial of stage one, running elsewhere
    storage = open_storage(url)
    assert nova_study.next_stage("staged", "speculative", study, spec, storage, url) is None
    assert "staged.speculative" not in optuna.study.get_all_study_names(url)
    study.tell(trial, state=optuna.trial.TrialState.FAIL)


def test_a_speculative_only_study_builds_on_the_given_tuned_configuration(tmp_path):
    url = f"sqlite:///{tmp_path}/s.db"
    path = staged_spec_file(
        tmp_path,
        stages=["speculative"],
        tuned={"max_num_seqs": 16, "enable_prefix_caching": False},
        budget={"n_trials": 4},
    )
    spec = load_spec(path)
    study = nova_study.create(spec, url, "reuse")
    assert study.study_name == "reuse.speculative"
    base = study.user_attrs[schema.BASE.key]
    assert base["config"]["max_num_seqs"] == 16 and base["config"]["enable_prefix_caching"] is False
    waiting = study.get_trials()
    # no tune stage measured stock: the speculative stage queues it first, then the tuned trial
    assert [t.user_attrs.get(schema.ROLE.key) for t in waiting] == ["stock", "tuned", None, None]
    r = nova("run", path, "--storage", url, "--study-name", "reuse", "--artifacts-dir", str(tmp_path / "a"))
    assert r.returncode == 0, r.stdout[-1500:] + r.stderr[-1500:]
    done = optuna.load_study(study_name="reuse.speculative", storage=url).get_trials()
    assert [t.state.name for t in done] == ["COMPLETE"] * 4
    stock, tuned, *drafters = (t.user_attrs[schema.CONFIG.key] for t in done)
    assert stock["speculative"] is None and stock["max_num_seqs"] != 16
    assert tuned["max_num_seqs"] == 16 and tuned["speculative"] is None
    assert all(d["speculative"] is not None for d in drafters)  # max_num_seqs redrawn with a drafter


def test_a_tune_stage_measures_the_given_tuned_configuration_as_a_reference(tmp_path):
    url = f"sqlite:///{tmp_path}/s.db"
    spec = load_spec(staged_spec_file(tmp_path, tuned={"max_num_seqs": 16}))
    study = nova_study.create(spec, url, "ref")
    roles = [t.user_attrs.get(schema.ROLE.key) for t in study.get_trials()]
    assert roles == ["stock", "reference"]
