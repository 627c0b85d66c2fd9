"""Both stages end to end on the real engine (vLLM CPU, the tiny model): studies/tiny-cpu-speculative.yaml
as a user runs it, smaller. Stage one tunes (one trial, stock: choosing among several is
test_stages_standin's), stage two measures the tuned stack again and then n-gram (the study's only
drafter here) on top of it; the verdict and the policy come out of `nova-search policy`. (Several
drafters staged, n-gram and the draft model, with verdicts and policy: test_stages_standin; the draft
model and EAGLE-3 served by this engine through nova's launcher, accepted and keeping the target's
output: test_trained_engine.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import optuna
import pytest

from nova_search import schema
from nova_search.testing.workers import vllm_processes
from tests.support import REPO

pytestmark = pytest.mark.engine


def test_a_staged_cpu_study_end_to_end(engine_python: str, tiny_model: Path, tmp_path: Path) -> None:
    before = vllm_processes()
    url = f"sqlite:///{tmp_path}/study.db"
    overrides = [
        f"model.path={tiny_model}",
        "space.speculative.method={choices: [ngram]}",
        "budget.per_stage={tune: 1, speculative: 2}",  # the tuned stack again, then n-gram
        "sweep.requests=6",
        "sweep.warmup_requests=1",
    ]
    argv = [
        sys.executable,
        "-m",
        "nova_search",
        "run",
        "studies/tiny-cpu-speculative.yaml",
        "--storage",
        url,
        "--artifacts-dir",
        str(tmp_path / "artifacts"),
    ]
    for o in overrides:
        argv += ["--set", o]
    r = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=1500)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]

    tune = optuna.load_study(study_name="tiny-cpu-speculative.tune", storage=url).get_trials()
    spec = optuna.load_study(study_name="tiny-cpu-speculative.speculative", storage=url)
    assert [t.state.name for t in tune] == ["COMPLETE"]
    trials = spec.get_trials()
    assert [t.state.name for t in trials] == ["COMPLETE"] * 2, [
        t.user_attrs.get(schema.MESSAGE.key) for t in trials
    ]
    assert trials[0].user_attrs[schema.ROLE.key] == "tuned"
    assert trials[0].user_attrs[schema.CONFIG.key] == spec.user_attrs[schema.BASE.key]["config"]
    methods = [t.user_attrs[schema.CONFIG.key]["speculative"]["method"] for t in trials[1:]]
    assert methods == ["ngram"]
    for t in trials[1:]:
        # the engine really drafted: acceptance counters from its /metrics, per level
        levels = t.user_attrs[schema.LEVELS.key]
        assert all(lv["spec_acceptance_rate"] is not None for lv in levels), t.number
        assert len(t.user_attrs[schema.REPEATS.key]["1"]) == 3  # three windows a level: verdicts possible
        ref = t.user_attrs[schema.REFERENCE.key]
        assert ref == trials[0].user_attrs[schema.REFERENCE.key]  # the same greedy tokens as tuned

    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "nova_search",
            "policy",
            "tiny-cpu-speculative",
            "--storage",
            url,
            "--format",
            "json",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["tuned"] == "speculative#0" and doc["stock"] == "tune#0"
    assert {d["method"] for d in doc["drafters"]} == {"ngram"}
    for d in doc["drafters"]:
        # verification-based speculation keeps the target's greedy output: none is flagged
        assert d["status"] in ("accepted", "rejected"), d["reason"]
        assert [g["concurrency"] for g in d["per_level"]] == [1, 4]
        assert all(g["n_tuned"] == 3 and g["n_candidate"] == 3 for g in d["per_level"])
        assert all(g["ci_low"] is not None for g in d["per_level"])
    policy = doc["policy"]
    assert policy[0]["min_concurrency"] == 1 and policy[-1]["max_concurrency"] is None
    for a, b in zip(policy, policy[1:], strict=False):
        assert b["min_concurrency"] == a["max_concurrency"] + 1  # contiguous, ordered
    for rng in policy:
        assert rng["argv"][:3] == [engine_python, "-m", "vllm.entrypoints.openai.api_server"]
        if rng["choice"] == "speculative":
            accepted = {d["method"] for d in doc["drafters"] if d["status"] == "accepted"}
            assert rng["method"] in accepted and rng["gain_pct"] > 0 and rng["ci_low"] > 0
    assert vllm_processes() - before == set()
