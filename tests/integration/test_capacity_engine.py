"""One capacity trial end to end on the real engine (vLLM's CPU build, the tiny model), driven by the CLI:
after the sweep, the search doubles the concurrency to its ceiling at an SLO every load meets, stores
the capacity per GPU as the trial's objective with its cost (a price for ``cpu``) and no energy (the
CPU build has no GPU power: said so, not zero), and status shows it; no vLLM process is left behind."""

from __future__ import annotations

import optuna
import pytest
import yaml

from nova_search import schema
from nova_search.testing.specs import tiny_spec
from nova_search.testing.workers import vllm_processes
from tests.support.cli import nova, nova_ok

pytestmark = pytest.mark.engine


def test_a_capacity_trial_on_the_real_engine(engine_python, tiny_model, tmp_path):
    before = vllm_processes()
    raw = tiny_spec(
        tiny_model,
        name="cap-engine",
        budget={"n_trials": 1},
        slo={"bounds": ["e2e p50 <= 60000"]},
        capacity={"start": 1, "ceiling": 4, "gpu_hour_usd": {"cpu": 0.1}},
        objectives=[
            {"metric": "capacity_per_gpu", "direction": "maximize"},
            {"metric": "output_throughput", "direction": "maximize"},
        ],
        constraints=["capacity_per_gpu >= 0.01"],
    )
    raw["sweep"]["concurrency"] = [1]
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(raw))
    url = f"sqlite:///{tmp_path}/s.db"
    env = {"NOVA_ENGINE_PYTHON": engine_python}
    r = nova(
        "run", str(spec), "--storage", url, "--artifacts-dir", str(tmp_path / "art"), env=env, timeout=900
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (t,) = optuna.load_study(study_name="cap-engine", storage=url).get_trials()
    assert t.state == optuna.trial.TrialState.COMPLETE
    c = schema.CAPACITY.read(t.user_attrs)
    assert c is not None and c.done
    assert [p.load for p in c.probes] == [1, 2, 4]  # doubled to the ceiling, every load meeting the SLO
    assert c.status == "found" and c.load == 4 and c.at_ceiling
    assert all(p.counts.measured == 6 and p.counts.met == 6 for p in c.probes)
    assert t.values[0] == pytest.approx(c.capacity_per_gpu) and c.capacity_per_gpu > 0
    assert list(t.constraints.values()) == [pytest.approx(0.01 - c.capacity_per_gpu)]  # feasible: <= 0
    assert c.cost_per_mtok == pytest.approx(0.1 / (c.output_throughput * 3600) * 1e6)
    assert c.joules_per_token is None and "engine.device is cpu" in c.energy_note
    status = nova_ok("status", "cap-engine", "--storage", url)
    assert "capacity at the SLO:" in status and "req/s per GPU at p50 e2e <= 60000 ms" in status
    assert "the search's ceiling" in status
    assert vllm_processes() == before
