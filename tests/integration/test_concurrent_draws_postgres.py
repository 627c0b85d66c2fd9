"""Workers started together (a k8s Indexed Job starts every pod at once) measure different
configurations: on a real PostgreSQL with the stand-in engine, 4 workers with one seed and a budget of
8 measure 8 distinct configurations (issue 40, finding 3)."""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from nova_search.search import lifecycle as nova_study
from nova_search.testing.fault_table import note
from nova_search.testing.pg import fresh_database
from nova_search.testing.specs import fake_spec
from nova_search.testing.workers import fake_engines, finish, worker

pytestmark = [pytest.mark.postgres, pytest.mark.faults]  # fault injection at full size: --all


def _configs(url: str) -> tuple[list[str], list[TrialState]]:
    """The study's measured configurations, and every trial's state."""
    trials = optuna.load_study(study_name="dist", storage=url).get_trials()
    done = [json.dumps(t.params, sort_keys=True) for t in trials if t.state == TrialState.COMPLETE]
    return done, [t.state for t in trials]


def test_four_workers_started_together_measure_distinct_configurations(tmp_path: Path):
    budget = 8
    with fresh_database() as url:
        # the default seed (0), as a spec that says nothing of it gets: every worker's sampler the same
        nova_study.create(fake_spec(budget), url, "dist")
        procs = [worker(url, tmp_path, "dist", FAKE_ENGINE_BOOT_S="0.5") for _ in range(4)]
        outs, hung = finish(procs, 240)
        configs, states = _configs(url)
        duplicates = len(configs) - len(set(configs))
        note(
            "concurrent draws",
            "4 workers started together, one seed, budget 8",
            duplicates=duplicates,
            lost=budget - len(configs),
            hung=hung,
        )
        # a worker killed at the bound (hung) leaves its trial RUNNING: its output says where it was
        assert [p.returncode for p in procs] == [0] * 4, "\n".join(o[-1500:] for o in outs)
        assert states == [TrialState.COMPLETE] * budget, states
        assert len(configs) == budget
        assert duplicates == 0, sorted(configs)  # 512 configurations: far from exhausted
    assert fake_engines() == []
