"""GPU sets on a real PostgreSQL, with the stand-in engine launched as vLLM is: each worker gives each
server exactly its GPUs (what the server saw, CUDA_VISIBLE_DEVICES, is recorded by the stand-in), no
GPU serves two servers at once, a trial of tensor_parallel_size 2 runs only where a worker holds two,
and the node launcher starts, stops and cleans up its workers."""

from __future__ import annotations

import itertools
import os
import re
import signal

import optuna
import pytest
from optuna.trial import TrialState

from nova_search import schema
from nova_search.db import count_toward_budget
from nova_search.search import lifecycle as nova_study
from nova_search.spec import parse_spec
from nova_search.testing.fake_engine import EngineLife, engine_records
from nova_search.testing.pg import fresh_database, read_trials
from nova_search.testing.specs import fake_spec_dict
from nova_search.testing.workers import alive, children, fake_engines, node, wait_until, worker
from tests.support.cli import nova

pytestmark = pytest.mark.postgres


def tp_study(url: str, n_trials: int, tp: object = None, queued_tp2: bool = False) -> None:
    raw = fake_spec_dict(n_trials)
    raw["space"]["tensor_parallel_size"] = tp if tp is not None else {"choices": [1, 2]}
    nova_study.create(parse_spec(raw), url, "dist")
    if queued_tp2:  # as a dead worker's retry of a TP=2 trial is queued: fixed at 2
        optuna.load_study(study_name="dist", storage=url).enqueue_trial({"tensor_parallel_size": 2})


def _port(argv: tuple[str, ...]) -> int:
    return int(argv[argv.index("--port") + 1])


def _life_of(trial: optuna.trial.FrozenTrial, lives: list[EngineLife]) -> EngineLife:
    """The server a trial ran: its port, started while the trial ran (the OS may give a port freed by
    an earlier server to a later one, so the port alone does not name a server)."""
    port = _port(schema.ARGV.read(trial.user_attrs))
    assert trial.datetime_start is not None and trial.datetime_complete is not None
    began, ended = trial.datetime_start.timestamp(), trial.datetime_complete.timestamp()
    [life] = [life for life in lives if life.port == port and began <= life.start <= ended]
    return life


def _overlaps(lives: list[EngineLife]) -> list[tuple[int, int, int]]:
    """(gpu, pid, pid) for every two servers that held one GPU at the same time."""
    out = []
    for a, b in itertools.combinations(lives, 2):
        assert a.stop is not None and b.stop is not None, "a server was not stopped by SIGTERM"
        shared = set(a.gpus or ()) & set(b.gpus or ())
        if shared and a.start < b.stop and b.start < a.stop:
            out.extend((g, a.pid, b.pid) for g in shared)
    return out


def test_each_server_gets_exactly_its_gpus_and_a_tp2_trial_runs_only_where_a_worker_holds_two(tmp_path):
    """Two 1-GPU workers (the node launcher, --gpus 0,1) and one worker that holds 2,3,4,5 (two slots
    of two GPUs, side by side) on one study searching tensor_parallel_size over 1 and 2, with a queued
    trial fixed at 2."""
    record = tmp_path / "engines.jsonl"
    env = {"FAKE_ENGINE_RECORD": str(record), "FAKE_ENGINE_ITL_S": "0.01"}
    with fresh_database() as url:
        tp_study(url, 12, queued_tp2=True)
        launcher = node(url, tmp_path, "dist", "--gpus", "0,1", **env)
        wide = worker(url, tmp_path, "dist", "--gpus", "2,3,4,5", **env)
        outs = [p.communicate(timeout=300)[0] for p in (launcher, wide)]
        assert [launcher.returncode, wide.returncode] == [0, 0], "\n".join(o[-2500:] for o in outs)
        trials = read_trials(url, "dist")
    assert fake_engines() == []
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 12 and count_toward_budget(trials) == 12
    lives = engine_records(record)
    assert len({life.pid for life in lives}) == len(lives) == 12
    ran: dict[int, tuple[int, tuple[int, ...]]] = {}
    for t in trials:
        config, tag = schema.CONFIG.read(t.user_attrs), schema.WORKER.read(t.user_attrs)
        life = _life_of(t, lives)
        # the server saw exactly the GPUs the trial records, as many as its tensor-parallel size
        assert life.gpus == tag.gpus and len(tag.gpus) == config.gpus == life.tensor_parallel_size, t.number
        ran[t.number] = (config.gpus, tag.gpus)
    on_narrow = [v for v in ran.values() if set(v[1]) <= {0, 1}]
    assert on_narrow and all(tp == 1 and len(g) == 1 for tp, g in on_narrow)  # never TP 2 on 1 GPU
    assert {g for _, g in on_narrow} <= {(0,), (1,)}
    assert ran[0][0] == 2 and set(ran[0][1]) <= {2, 3, 4, 5}  # the queued TP=2 trial
    assert {tp for tp, _ in ran.values()} == {1, 2}
    wide_gpus = {g for _, gs in ran.values() for g in gs if g >= 2}
    assert all(gs in ((2,), (2, 3), (4,), (4, 5)) for _, gs in ran.values() if gs[0] >= 2)  # slot heads
    assert wide_gpus <= {2, 3, 4, 5}
    assert _overlaps(lives) == []  # no GPU served two servers at once


def _node_workers(launcher, expected: int) -> list[int]:
    wait_until(lambda: len(children(launcher.pid)) == expected, 60, f"{expected} workers")
    return children(launcher.pid)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_the_node_launcher_stops_every_worker_and_leaves_nothing_running(tmp_path, sig):
    slow = {"FAKE_ENGINE_ITL_S": "0.05"}  # a trial takes seconds: servers are up when the signal comes
    with fresh_database() as url:
        tp_study(url, 50, tp=1)
        launcher = node(url, tmp_path, "dist", "--gpus", "0,1,2", "--grace", "60", **slow)
        try:
            pids = _node_workers(launcher, 3)
            wait_until(lambda: len(fake_engines()) == 3, 90, "a server per worker")
            os.kill(launcher.pid, sig)
            out = launcher.communicate(timeout=120)[0]
        finally:
            if launcher.poll() is None:
                launcher.kill()
        assert launcher.returncode == 130, out[-3000:]
        assert not [p for p in pids if alive(p)]
        assert fake_engines() == []
        for gpu in (0, 1, 2):
            assert f"[gpus {gpu}] worker started (pid " in out and f"[gpus {gpu}] worker exited 130" in out
        assert re.search(r"\[gpus 1\] .*trial \d+", out)  # each worker's output, prefixed
        logs = tmp_path / "artifacts" / "dist" / "node"
        assert sorted(p.name for p in logs.iterdir()) == [f"worker-gpus-{g}.log" for g in (0, 1, 2)]
        trials = read_trials(url, "dist")
        assert not [t for t in trials if t.state == TrialState.RUNNING]
        stopped = [t for t in trials if t.state == TrialState.FAIL]
        assert len(stopped) == 3 and {schema.REASON.read(t.user_attrs) for t in stopped} == {"interrupted"}


def test_a_launcher_killed_with_sigkill_takes_its_workers_and_their_servers_with_it(tmp_path):
    with fresh_database() as url:
        tp_study(url, 50, tp=1)
        launcher = node(url, tmp_path, "dist", "--gpus", "0,1", FAKE_ENGINE_ITL_S="0.05")
        try:
            pids = _node_workers(launcher, 2)
            wait_until(lambda: len(fake_engines()) == 2, 90, "a server per worker")
            launcher.kill()
            launcher.wait(timeout=10)
        finally:
            if launcher.poll() is None:
                launcher.kill()
        # the kernel sends each worker SIGTERM (PR_SET_PDEATHSIG): they stop their servers and exit
        wait_until(lambda: not [p for p in pids if alive(p)], 60, "the workers to exit")
        wait_until(lambda: fake_engines() == [], 30, "no server left")
        trials = read_trials(url, "dist")
        assert not [t for t in trials if t.state == TrialState.RUNNING]


def test_the_node_launcher_refuses_bad_groups_before_starting_anything(tmp_path):
    url = f"sqlite:///{tmp_path / 'n.db'}"
    tp_study(url, 2, tp=2)
    env = {"NOVA_STORAGE": url}
    r = nova("node", "dist", "--gpus", "0,1,2", "--gpus-per-worker", "2", env=env)
    assert r.returncode == 2 and "--gpus-per-worker 2: must divide the 3 GPUs of --gpus 0,1,2" in r.stderr
    r = nova("node", "dist", "--gpus", "0,1", env=env)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "--gpus 0: trials of stage joint launch tensor_parallel_size 2" in r.stderr
    r = nova("node", "dist", "--gpus", "0,0", "--gpus-per-worker", "2", env=env)
    assert r.returncode == 2 and "listed twice" in r.stderr
    assert "worker started" not in r.stdout
    assert read_trials(url, "dist") == []


def test_two_workers_given_the_same_gpu_never_run_servers_on_it_at_once(tmp_path):
    """Issue 40, finding 8: two workers of one host, both started with --gpus 0 (a mistyped node
    script, two launches of one job). A per-host lock per GPU (db-free: a flock in the GPU lock
    folder) lets one worker's server hold GPU 0 at a time; both finish the budget between them."""
    record = tmp_path / "engines.jsonl"
    locks = tmp_path / "gpu-locks"
    raw = fake_spec_dict(4)
    with fresh_database() as url:
        nova_study.create(parse_spec(raw), url, "dist")
        env = {
            "FAKE_ENGINE_RECORD": str(record),
            "FAKE_ENGINE_ITL_S": "0.01",
            "NOVA_GPU_LOCK_DIR": str(locks),
        }
        procs = [worker(url, tmp_path, "dist", "--gpus", "0", **env) for _ in range(2)]
        outs = [p.communicate(timeout=240)[0] for p in procs]
        assert [p.returncode for p in procs] == [0, 0], "\n".join(o[-2000:] for o in outs)
        lives = engine_records(record)
        assert len(lives) == 4 and all(life.gpus == (0,) for life in lives), lives
        assert _overlaps(lives) == []
        trials = read_trials(url, "dist")
        assert [t.state for t in trials] == [TrialState.COMPLETE] * 4
    assert fake_engines() == []
