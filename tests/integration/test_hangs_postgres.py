"""Hangs without a bound (issue 40, finding 5), on a real PostgreSQL with the stand-in engine: a FIFO
or a device where a file is read never blocks a worker (it exits 2 before its first trial, naming the
field, and no trial is asked); a server wedged mid-level (its processes stopped) fails its trial within
the trial's deadline, is torn down, and the worker goes on to its next trial."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from nova_search import schema
from nova_search.models.tiny import build_tokenizer
from nova_search.search import lifecycle as nova_study
from nova_search.spec import parse_spec
from nova_search.testing.fault_table import note
from nova_search.testing.pg import fresh_database
from nova_search.testing.specs import fake_spec, fake_spec_dict
from nova_search.testing.workers import fake_engine_pids, fake_engines, finish, wait_until, worker

pytestmark = [pytest.mark.postgres, pytest.mark.faults]  # fault injection at full size: --all


def _run_worker(url: str, tmp_path: Path, timeout: float = 30) -> tuple[int | None, str, float]:
    """The worker's exit status (None: still running after ``timeout``, killed), output, seconds."""
    started = time.monotonic()
    proc = worker(url, tmp_path, "dist")
    try:
        out = proc.communicate(timeout=timeout)[0]
        return proc.returncode, out, time.monotonic() - started
    except subprocess.TimeoutExpired:
        proc.kill()
        return None, proc.communicate()[0], time.monotonic() - started


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_workload_file_that_is_a_fifo_or_a_device_stops_the_worker_before_its_first_trial(
    tmp_path: Path, kind: str
):
    path = tmp_path / "prompts.jsonl"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    tokenizer = tmp_path / "tok"
    tokenizer.mkdir()
    build_tokenizer(tokenizer)
    raw = fake_spec_dict(2, workload={"kind": "jsonl", "path": str(path), "tokenizer": str(tokenizer)})
    with fresh_database() as url:
        nova_study.create(parse_spec(raw), url, "dist")
        code, out, took = _run_worker(url, tmp_path)
        spent = len(optuna.load_study(study_name="dist", storage=url).get_trials())
        note("hangs", f"workload.path a {kind}", hung=int(code is None or took >= 20), lost=spent)
        assert code == 2, (code, out[-2000:])
        assert took < 20 and "workload.path" in out and "not a regular file" in out, out[-2000:]
        assert "Traceback" not in out
        assert spent == 0  # no trial asked
    assert fake_engines() == []


def test_a_model_config_that_is_a_fifo_stops_the_worker_before_its_first_trial(tmp_path: Path):
    model = tmp_path / "model"
    model.mkdir()
    os.mkfifo(model / "config.json")
    raw = fake_spec_dict(2)
    raw["model"] = {"path": str(model), "served_name": "fake"}  # no vocab_size: config.json is read
    with fresh_database() as url:
        nova_study.create(parse_spec(raw), url, "dist")
        code, out, took = _run_worker(url, tmp_path)
        spent = len(optuna.load_study(study_name="dist", storage=url).get_trials())
        note("hangs", "the model's config.json a FIFO", hung=int(code is None or took >= 20), lost=spent)
        assert code == 2, (code, out[-2000:])
        assert took < 20 and "config.json" in out and "FIFO" in out, out[-2000:]
        assert spent == 0  # no trial asked
    assert fake_engines() == []


@pytest.mark.parametrize(
    ("sweep", "reason", "bound_s"),
    [
        # the trial's deadline: a request timeout of 60 s, 20 requests at concurrency 1 (then 4):
        # about 20 minutes without a bound
        ({"request_timeout_s": 60, "trial_timeout_s": 20}, "timeout", 30),
        # the level's error budget (5 % of 20 requests: 1): the second timed-out request abandons the
        # level. At worst one timeout (3 s) in the reference outputs (the rest are not sent), one in
        # the warmup, two in the window, and the teardown (5 s): 17 s; without the bounds, 29 timeouts
        ({"request_timeout_s": 3}, "errors", 30),
    ],
    ids=["deadline", "error-budget"],
)
def test_a_wedged_server_fails_its_trial_in_bound_and_the_worker_goes_on(
    tmp_path: Path, sweep: dict, reason: str, bound_s: float
):
    """The engine is stopped (SIGSTOP) mid-level. The trial ends FAIL within the bound, its server is
    torn down (no orphan), and the worker runs its next trial."""
    spec = fake_spec(2, sweep={"concurrency": [1, 4], "warmup_requests": 1, "requests": 20, **sweep})
    with fresh_database() as url:
        nova_study.create(spec, url, "dist")
        proc = worker(url, tmp_path, "dist", FAKE_ENGINE_ITL_S="0.02")
        try:
            wait_until(lambda: len(fake_engine_pids()) >= 1, 60, "the first trial's engine")
            (pid,) = fake_engine_pids()
            time.sleep(8)  # booted (0.2 s), reference outputs (5 s) and warmup sent: inside the window
            os.kill(pid, signal.SIGSTOP)
            stopped_at = time.monotonic()
            wait_until(lambda: not _alive(pid), 120, "the wedged engine torn down")
            took = time.monotonic() - stopped_at
            (out,), hung = finish([proc], 120)
        finally:
            if proc.poll() is None:
                proc.kill()
        trials = optuna.load_study(study_name="dist", storage=url).get_trials()
        running = sum(t.state == TrialState.RUNNING for t in trials)
        note("hangs", f"a wedged server ({reason})", hung=hung + (took >= bound_s), lost=running)
        assert proc.returncode == 0, out[-3000:]
        assert took < bound_s, (took, out[-2000:])
        first = trials[0]
        assert first.state == TrialState.FAIL
        assert schema.REASON.read(first.user_attrs) == reason, first.user_attrs
        assert [t.state for t in trials[1:]] == [TrialState.COMPLETE], out[-3000:]
    assert fake_engines() == []


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
