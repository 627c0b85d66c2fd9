"""Confirmation on the real engine (vLLM's CPU build, the tiny model), in one staged study: the tuned
baseline measured by one worker (--max-trials 1); the next worker's first drafter trial boots that
baseline beside it as the leader and is measured again in ABBA pairs against it. The CPU build has no
sleep mode, so the leader waits awake beside the trial (park: auto -> keep), and no server outlives the
worker. (The tune stage confirms against its best trial by the same code, and a worker's first
confirmed trial there boots the study's best by the same boot as here: test_confirm_standin.)"""

from __future__ import annotations

import optuna
import pytest
import yaml

from nova_search import schema
from nova_search.testing.specs import tiny_spec
from nova_search.testing.workers import vllm_processes
from tests.support.cli import nova

pytestmark = pytest.mark.engine


def test_a_workers_first_drafter_trial_is_paired_with_the_tuned_baseline_it_boots(
    engine_python, tiny_model, tmp_path
):
    before = vllm_processes()
    raw = tiny_spec(
        tiny_model,
        name="adopt-engine",
        stages=["speculative"],
        baselines=[],  # the pairing with the tuned leader is the point: no stock trial
        tuned={"max_num_seqs": 4},
        space={
            "speculative": {
                "method": {"choices": ["ngram"]},
                "num_speculative_tokens": 2,
                "prompt_lookup_min": 2,
                "prompt_lookup_max": 3,
            }
        },
        budget={"n_trials": 2},
        confirm={"min_pairs": 2, "max_pairs": 2, "levels": [2]},
    )
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(raw))
    url = f"sqlite:///{tmp_path}/s.db"
    env = {"NOVA_ENGINE_PYTHON": engine_python}
    art = str(tmp_path / "art")
    assert nova("create", str(spec), "--storage", url, env=env).returncode == 0
    for more in (["--max-trials", "1"], []):
        r = nova(
            "worker", "adopt-engine", "--storage", url, "--artifacts-dir", art, *more, env=env, timeout=900
        )
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "booted as the leader" in r.stdout
    tuned, drafter = optuna.load_study(study_name="adopt-engine.speculative", storage=url).get_trials()
    assert schema.ROLE.read(tuned.user_attrs) == "tuned"
    assert tuned.state == drafter.state == optuna.trial.TrialState.COMPLETE

    alone = schema.PAIRED.read(tuned.user_attrs)  # the first trial: no leader to pair with
    assert alone is None or alone.leader is None
    paired = schema.PAIRED.read(drafter.user_attrs)
    assert paired is not None and paired.leader == tuned.number and paired.park == "keep"
    assert paired.pairs == 2 and paired.stopped == "cap" and set(paired.levels) == {2}
    lead, mine = paired.levels[2]
    assert len(lead) == len(mine) == 2 and all(w["output_throughput"] > 0 for w in (*lead, *mine))
    windows = schema.REPEATS.read(drafter.user_attrs)
    assert len(windows[2]) == 3 and 1 not in windows  # level 1 was not confirmed: one window
    assert "--enable-sleep-mode" not in schema.ARGV.read(drafter.user_attrs)
    assert schema.TIMING.read(drafter.user_attrs)["leader_boot_s"] > 0
    assert vllm_processes() <= before  # the adopted leader went with the worker
