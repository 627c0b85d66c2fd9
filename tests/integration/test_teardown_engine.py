"""A worker that is interrupted or killed never leaves a vLLM server behind (real engine)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import optuna
import pytest

from nova_search import schema
from nova_search.search import lifecycle as nova_study
from nova_search.spec import parse_spec
from nova_search.testing.specs import tiny_spec
from nova_search.testing.workers import vllm_processes
from tests.support import REPO

pytestmark = pytest.mark.engine


def _start_worker(engine_python: str, url: str, tmp_path) -> subprocess.Popen:
    env = {**os.environ, "NOVA_ENGINE_PYTHON": engine_python}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "nova_search",
            "worker",
            "t",
            "--storage",
            url,
            "--artifacts-dir",
            str(tmp_path / "artifacts"),
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _wait_for_engine_core(before: set[str], timeout: float = 180) -> set[str]:
    """Wait until the trial's server has spawned its engine-core child: then a group kill matters."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        new = vllm_processes() - before
        if any("VLLM::EngineCore" in p for p in new):
            return new
        time.sleep(0.5)
    raise AssertionError(f"no engine core appeared within {timeout}s; new processes: {new}")


def _wait_gone(before: set[str], timeout: float = 60) -> set[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = vllm_processes() - before
        if not left:
            return left
        time.sleep(0.5)
    return vllm_processes() - before


def _study(tiny_model, tmp_path) -> str:
    url = f"sqlite:///{tmp_path}/t.db"
    raw = tiny_spec(tiny_model, budget={"n_trials": 1}, baselines=["stock"])
    nova_study.create(parse_spec(raw), url, "t")
    return url


def test_sigterm_stops_server_and_fails_trial_as_interrupted(engine_python, tiny_model, tmp_path):
    before = vllm_processes()
    url = _study(tiny_model, tmp_path)
    worker = _start_worker(engine_python, url, tmp_path)
    try:
        assert _wait_for_engine_core(before)
        worker.send_signal(signal.SIGTERM)
        out, _ = worker.communicate(timeout=90)
    finally:
        if worker.poll() is None:
            worker.kill()
    assert worker.returncode == 130, out[-2000:]
    (trial,) = optuna.load_study(study_name="t", storage=url).get_trials()
    assert trial.state == optuna.trial.TrialState.FAIL
    assert trial.user_attrs[schema.REASON.key] == "interrupted"
    assert vllm_processes() - before == set()


def test_killed_worker_leaves_no_orphan_server(engine_python, tiny_model, tmp_path):
    before = vllm_processes()
    url = _study(tiny_model, tmp_path)
    worker = _start_worker(engine_python, url, tmp_path)
    try:
        spawned = _wait_for_engine_core(before)
        assert spawned
        # the server's API key file, as the argv stored on the trial names it (on disk while it boots)
        (trial,) = optuna.load_study(study_name="t", storage=url).get_trials()
        argv = trial.user_attrs[schema.ARGV.key]
        key_file = argv[argv.index("--config") + 1]
        os.kill(worker.pid, signal.SIGKILL)  # no handler runs: only the guard process can clean up
        worker.wait(timeout=10)
    finally:
        if worker.poll() is None:
            worker.kill()
    assert _wait_gone(before) == set()
    # the guard deletes the key file once the group is gone (at worst after its two 5 s grace periods)
    deadline = time.monotonic() + 30
    while os.path.exists(key_file) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not os.path.exists(key_file), "the API key file outlived a killed worker"
