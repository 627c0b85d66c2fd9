"""Stopping a trial after a level (spec ``early_stop``): on the stand-in engine, a configuration that is
plainly slower is stopped after its first level, dominated by the stock baseline; on the real engine
(vLLM's CPU build, the tiny model), a broken SLO stops the trial after its first level. Either way the
measured level, the reason and the GPU time are kept, and the trial counts toward the budget."""

from __future__ import annotations

import optuna
import pytest
import yaml

from nova_search import schema
from nova_search.testing.specs import minimal_spec_dict, tiny_spec
from nova_search.testing.workers import vllm_processes
from tests.support.cli import nova, nova_ok

PRUNED, COMPLETE = optuna.trial.TrialState.PRUNED, optuna.trial.TrialState.COMPLETE


def _run(
    tmp_path, raw: dict, env: dict[str, str] | None = None
) -> tuple[list[optuna.trial.FrozenTrial], str]:
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(raw))
    url = f"sqlite:///{tmp_path}/s.db"
    r = nova(
        "run", str(spec), "--storage", url, "--artifacts-dir", str(tmp_path / "art"), env=env, timeout=600
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    status = nova_ok("status", raw["name"], "--storage", url)
    trials = optuna.load_study(study_name=raw["name"], storage=url).get_trials()
    return trials, status


def test_a_dominated_trial_stops_after_its_first_level_on_the_standin(tmp_path):
    raw = minimal_spec_dict(
        name="early",
        # every sampled trial passes --enable-prefix-caching, which makes the stand-in 4 times slower;
        # the stock baseline (trial 0) does not
        space={"enable_prefix_caching": {"choices": [True]}},
        workload={"input_len": 16, "output_len": 16},
        sweep={"concurrency": [1, 2, 4], "warmup_requests": 1, "requests": 6},
        objectives=[
            {"metric": "output_throughput", "direction": "maximize"},
            {"metric": "ttft_p99_ms", "direction": "minimize", "at": 4},
        ],
        budget={"n_trials": 2},
        early_stop={"margin": 0.2},
    )
    trials, status = _run(tmp_path, raw, env={"FAKE_ENGINE_SLOW_WITH": "--enable-prefix-caching"})
    assert [t.state for t in trials] == [COMPLETE, PRUNED]  # the budget of 2 is met: the pruned trial counts
    stock, slow = trials
    assert len(stock.user_attrs[schema.LEVELS.key]) == 3
    assert [lv["concurrency"] for lv in slow.user_attrs[schema.LEVELS.key]] == [1]
    assert slow.user_attrs[schema.REASON.key] == "dominated"
    message = slow.user_attrs[schema.MESSAGE.key]
    assert "stopped after concurrency 1" in message and "trial 0" in message
    timing = slow.user_attrs[schema.TIMING.key]
    assert timing["measure_s"] > 0 and timing["boot_s"] > 0
    assert "note: trial 1 dominated: stopped after concurrency 1" in status


@pytest.mark.engine
def test_a_broken_slo_stops_a_trial_on_the_real_engine(engine_python, tiny_model, tmp_path):
    before = vllm_processes()
    raw = tiny_spec(
        tiny_model,
        name="early-engine",
        budget={"n_trials": 1},
        constraints=["ttft_p50_ms <= 0.001"],  # no real server meets it, at any level
        early_stop={},
    )
    trials, status = _run(tmp_path, raw, env={"NOVA_ENGINE_PYTHON": engine_python})
    (stock,) = trials
    assert stock.state == PRUNED
    assert stock.user_attrs[schema.REASON.key] == "constraint"
    assert "ttft_p50_ms<=0.001@every fails at concurrency 1" in stock.user_attrs[schema.MESSAGE.key]
    (lv,) = stock.user_attrs[schema.LEVELS.key]  # the measured level is kept; level 2 never ran
    assert lv["concurrency"] == 1 and lv["completed"] == 6 and lv["ttft_p50_ms"] > 0.001
    assert stock.user_attrs[schema.TIMING.key]["boot_s"] > 1
    assert "note: trial 0 constraint: stopped after concurrency 1" in status
    assert vllm_processes() <= before
