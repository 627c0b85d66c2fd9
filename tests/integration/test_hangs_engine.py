"""A wedged real vLLM server (issue 40, finding 5): the CPU engine with the tiny model, every process of
its group stopped (SIGSTOP) while a level is measured. The trial ends FAIL within its bounds (the
level's error budget, the trial's deadline), the server's whole group is torn down (no orphan engine
core), and the worker exits."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from nova_search import schema
from nova_search.search import lifecycle as nova_study
from nova_search.spec import parse_spec
from nova_search.testing.pg import fresh_database
from nova_search.testing.specs import tiny_spec
from nova_search.testing.workers import vllm_processes
from tests.support import REPO

pytestmark = [pytest.mark.engine, pytest.mark.postgres]


def _wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def test_a_stopped_vllm_fails_its_trial_in_bound_and_leaves_nothing(
    engine_python, tiny_model, tmp_path: Path
):
    before = vllm_processes()
    raw = tiny_spec(tiny_model, budget={"n_trials": 1}, baselines=["stock"])
    # the engine tier runs one test at a time: a request to the tiny model takes well under a second
    # there, so 30 s is a timeout only a stopped server reaches
    raw["sweep"] = {**raw["sweep"], "concurrency": [1], "requests": 20, "request_timeout_s": 30}
    raw["objectives"] = [{"metric": "output_throughput", "direction": "maximize"}]
    raw["constraints"] = []
    with fresh_database() as url:
        nova_study.create(parse_spec(raw), url, "t")
        env = {**os.environ, "NOVA_ENGINE_PYTHON": engine_python}
        argv = [sys.executable, "-m", "nova_search", "worker", "t", "--storage", url]
        worker = subprocess.Popen(
            [*argv, "--artifacts-dir", str(tmp_path / "artifacts")],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            log = tmp_path / "artifacts" / "t" / "trial-0000" / "server.log"

            def measuring() -> bool:  # the reference outputs (8) and the warmup are done
                text = log.read_text(errors="replace") if log.exists() else ""
                return text.count("POST /v1/completions") >= 11

            _wait(measuring, 600, "the trial's level under way")
            group = {int(p.split()[0]) for p in vllm_processes() - before}
            assert group
            for pid in group:
                os.kill(pid, signal.SIGSTOP)
            stopped_at = time.monotonic()
            out = worker.communicate(timeout=400)[0]
            took = time.monotonic() - stopped_at
        finally:
            if worker.poll() is None:
                worker.kill()
        # the error budget (5 % of 20: 1) is spent by the second timed-out request, 2 x 30 s, then the
        # teardown of a stopped group (its SIGTERM waits, then SIGKILL): without the bound, up to
        # 20 x 30 s
        assert took < 150, (took, out[-3000:])
        (trial,) = optuna.load_study(study_name="t", storage=url).get_trials()
        assert trial.state == TrialState.FAIL
        assert schema.REASON.read(trial.user_attrs) in ("errors", "timeout"), trial.user_attrs
        assert "Traceback" not in out
    left = vllm_processes() - before
    assert not left, left
