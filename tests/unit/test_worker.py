"""The worker loop without an engine: ``trial.run_trial`` is replaced by a function that returns values
(or fails) at once, on a real SQLite storage. Budget, outcomes, the on_trial_done callback, orphaned
trials, deferred signals, retried storage calls."""

from __future__ import annotations

import os
import signal
import threading
import time

import optuna
import pytest
from optuna.trial import TrialState
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError, OperationalError, PendingRollbackError

from nova_search import schema
from nova_search.db import count_toward_budget, open_storage, retrying
from nova_search.db.failures import is_transient, storage_error
from nova_search.db.heartbeat import requeue_orphan
from nova_search.errors import StorageError, TrialFailure
from nova_search.knobs import EngineConfig
from nova_search.search import lifecycle as nova_study
from nova_search.search.placement import NoSlot, server_gpus
from nova_search.spec import parse_spec
from nova_search.testing.specs import fake_spec_dict
from nova_search.trial.run import choose_config
from nova_search.worker import loop as worker


@pytest.fixture
def url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'w.db'}"


def make(url: str, n: int) -> tuple[optuna.Study, object]:
    spec = parse_spec(fake_spec_dict(n))
    nova_study.create(spec, url, "w")
    return nova_study.load("w", url)


def test_the_budget_is_met_exactly_and_each_trial_is_reported_once(url, monkeypatch, tmp_path):
    study, spec = make(url, 5)
    outcomes = iter(
        [[1.0, 2.0], optuna.TrialPruned(), TrialFailure("oom", "x"), RuntimeError("bug"), [3.0, 1.0]]
    )

    def fake_run(trial, ctx):
        schema.CONFIG.write(trial, EngineConfig(max_num_seqs=8))
        out = next(outcomes)
        if isinstance(out, BaseException):
            raise out
        return out

    monkeypatch.setattr(worker, "run_trial", fake_run)
    done: list[tuple[int, TrialState]] = []
    opts = worker.WorkerOptions(
        artifacts_dir=str(tmp_path / "a"), on_trial_done=lambda s, t: done.append((t.number, t.state))
    )
    assert worker.run_worker(study, spec, opts) == 5
    trials = study.get_trials()
    assert [t.state for t in trials] == [
        TrialState.COMPLETE,
        TrialState.PRUNED,
        TrialState.FAIL,
        TrialState.FAIL,
        TrialState.COMPLETE,
    ]
    assert done == [(t.number, t.state) for t in trials]  # after each tell, with its final state
    assert (
        trials[3].user_attrs[schema.REASON.key] == "internal"
        and "bug" in trials[3].user_attrs[schema.MESSAGE.key]
    )
    assert count_toward_budget(trials) == 5
    # a second worker finds the budget spent and runs nothing
    assert worker.run_worker(study, spec, opts) == 0


def test_a_callback_that_raises_never_costs_the_study(url, monkeypatch, tmp_path):
    study, spec = make(url, 2)
    monkeypatch.setattr(worker, "run_trial", lambda trial, ctx: [1.0, 1.0])

    def broken(s, t):
        raise RuntimeError("dashboard down")

    opts = worker.WorkerOptions(artifacts_dir=str(tmp_path / "a"), on_trial_done=broken)
    assert worker.run_worker(study, spec, opts) == 2
    assert [t.state for t in study.get_trials()] == [TrialState.COMPLETE] * 2


def test_an_asked_trial_that_never_heartbeated_is_failed_and_requeued_after_the_grace_period(
    url, monkeypatch
):
    monkeypatch.setenv("NOVA_HEARTBEAT_INTERVAL", "1")
    monkeypatch.setenv("NOVA_GRACE_PERIOD", "2")
    spec = parse_spec(fake_spec_dict(2))
    nova_study.create(spec, url, "w")
    storage = open_storage(url)
    study = optuna.load_study(study_name="w", storage=storage)
    orphan = study.ask()  # asked, then the worker "died": no heartbeat ever
    beating = study.ask()
    storage.record_heartbeat(beating._trial_id)
    # seen without a heartbeat by this process for less than the grace period (its start time is the
    # asking worker's clock, which is never trusted: test_retries_postgres sets it an hour back)
    assert worker.fail_orphans(study, storage) == []
    time.sleep(2.5)
    assert worker.fail_orphans(study, storage) == [orphan.number]
    trials = study.get_trials()
    assert trials[orphan.number].state == TrialState.FAIL
    assert trials[beating.number].state == TrialState.RUNNING  # it beats: Optuna's stale check owns it
    (retry,) = [t for t in trials if t.state == TrialState.WAITING]
    assert retry.system_attrs[schema.RETRY_OF] == orphan.number
    assert count_toward_budget(trials) == 1  # the failed orphan is replaced by its retry


def test_the_first_heartbeat_is_written_with_the_ask(url):
    study, spec = make(url, 1)
    storage = worker.rdb_storage(study)
    lock = worker.StorageLock(storage.engine, "w")
    trial = worker.ask_within_budget(study, lock, budget=1)
    with storage.engine.connect() as conn:
        n = conn.execute(
            text("SELECT count(*) FROM trial_heartbeats WHERE trial_id = :i"), {"i": trial._trial_id}
        ).scalar_one()
    assert n == 1
    assert worker.ask_within_budget(study, lock, budget=1) is None  # the budget is spent


def test_the_first_heartbeat_is_written_before_the_draw(url):
    """A draw's writes queue behind a busy database: a trial RUNNING without a beat meanwhile would be
    failed as an orphan by another worker (seen in CI: a fleet worker then died on its own trial)."""
    study, spec = make(url, 1)
    storage = worker.rdb_storage(study)
    lock = worker.StorageLock(storage.engine, "w")
    seen: list[int] = []

    def draw(trial: optuna.Trial) -> None:
        with storage.engine.connect() as conn:
            seen.append(
                conn.execute(
                    text("SELECT count(*) FROM trial_heartbeats WHERE trial_id = :i"), {"i": trial._trial_id}
                ).scalar_one()
            )

    assert worker.ask_within_budget(study, lock, budget=1, draw=draw) is not None
    assert seen == [1]


def test_a_tell_that_loses_the_race_to_an_orphan_check_drops_the_outcome_and_says_so(url, caplog):
    """Optuna's ``skip_if_finished`` reads, then writes: another worker's FAIL between the two raised
    UpdateFinishedTrialError out of the worker (a CI fleet run). Now the outcome is dropped, in one line."""
    study, spec = make(url, 1)
    trial = study.ask()
    other = optuna.load_study(study_name="w", storage=open_storage(url))
    storage = worker.rdb_storage(study)
    write = storage.set_trial_state_values

    def fail_first_elsewhere(trial_id, state, values=None):
        worker.rdb_storage(other).set_trial_state_values(trial_id, TrialState.FAIL)
        return write(trial_id, state, values)

    storage.set_trial_state_values = fail_first_elsewhere  # type: ignore[method-assign]
    with caplog.at_level("WARNING", logger="nova_search"):
        assert worker.tell_outcome(study, trial, TrialState.COMPLETE, [1.0, 1.0], 0.0) is False
    assert "was failed by another worker" in caplog.text
    assert worker.rdb_storage(other).get_trial(trial._trial_id).state == TrialState.FAIL


def test_signals_are_deferred_while_an_outcome_is_recorded():
    seen = []
    with pytest.raises(KeyboardInterrupt):
        with worker.signals_deferred():
            os.kill(os.getpid(), signal.SIGINT)
            seen.append("still recording")  # the signal did not cut this short
    assert seen == ["still recording"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_sigterm_while_an_outcome_is_recorded_leaves_later_ones_ignored():
    """The worker stops on it; a second SIGTERM (the launcher's death signal, say) landing while Python
    exits must not raise again, or the exit status becomes "killed by SIGINT" instead of 130."""

    def raising(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, raising)
    try:
        with pytest.raises(KeyboardInterrupt):
            with worker.signals_deferred():
                os.kill(os.getpid(), signal.SIGTERM)
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
        os.kill(os.getpid(), signal.SIGTERM)  # ignored: nothing raised
        with worker.signals_deferred():  # no signal this time: the handler in place is kept
            pass
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, old)


def test_a_tp2_trial_never_starts_on_a_one_gpu_worker_and_waits_for_a_worker_with_two(
    url, monkeypatch, tmp_path
):
    """tensor_parallel_size searched over 1 and 2, and a queued trial fixed at 2 (as a dead worker's
    retry is): the 1-GPU worker draws only TP 1 and leaves the queued trial WAITING, costing no budget;
    the 2-GPU worker takes it and gives its server both GPUs."""
    raw = fake_spec_dict(5)
    raw["space"]["tensor_parallel_size"] = {"choices": [1, 2]}
    spec = parse_spec(raw)
    nova_study.create(spec, url, "w")
    study, spec = nova_study.load("w", url)
    study.enqueue_trial({"tensor_parallel_size": 2})
    ran: list[tuple[int, int, tuple[int, ...]]] = []

    def fake_run(trial, ctx):
        config = choose_config(trial, ctx.spec, ctx.stage, ctx.base_config)  # the real sampling path
        ran.append((trial.number, config.gpus, server_gpus(ctx.slot.gpus, config)))
        return [float(config.max_num_seqs or 1), 1.0]

    monkeypatch.setattr(worker, "run_trial", fake_run)
    one = worker.WorkerOptions(gpus=(7,), max_trials=4, artifacts_dir=str(tmp_path / "a"))
    assert worker.run_worker(study, spec, one) == 4
    assert [(tp, gpus) for _, tp, gpus in ran] == [(1, (7,))] * 4
    queued = study.get_trials(states=(TrialState.WAITING,))
    assert [t.number for t in queued] == [0]  # still queued, not counted
    assert count_toward_budget(study.get_trials()) == 4
    ran.clear()
    study, spec = nova_study.load("w", url)
    two = worker.WorkerOptions(gpus=(0, 1), artifacts_dir=str(tmp_path / "a"))
    assert worker.run_worker(study, spec, two) == 1
    assert ran == [(0, 2, (0, 1))]
    trials = study.get_trials()
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 5 and count_toward_budget(trials) == 5


def test_a_worker_whose_gpus_fit_no_trial_refuses_to_start(url, tmp_path):
    raw = fake_spec_dict(2)
    raw["space"]["tensor_parallel_size"] = 2
    spec = parse_spec(raw)
    nova_study.create(spec, url, "w")
    study, spec = nova_study.load("w", url)
    with pytest.raises(NoSlot, match="--gpus 3: trials of stage joint launch tensor_parallel_size 2"):
        worker.run_worker(study, spec, worker.WorkerOptions(gpus=(3,), artifacts_dir=str(tmp_path / "a")))
    assert study.get_trials() == []


def test_retrying_waits_out_a_transient_error_and_gives_up_after_its_window():
    calls = {"n": 0}

    def flaky() -> str:
        calls["n"] += 1
        if calls["n"] < 3:
            raise OperationalError("SELECT 1", {}, Exception("connection reset"))
        return "ok"

    assert retrying(flaky, 10, "read x") == "ok" and calls["n"] == 3

    def down() -> None:
        raise OperationalError("SELECT 1", {}, Exception("connection refused"))

    with pytest.raises(StorageError, match=r"cannot read x the storage after \d+ attempts over 0.5 s"):
        retrying(down, 0.5, "read x")

    def refused() -> None:
        raise ValueError("not a storage error")

    with pytest.raises(ValueError):  # not transient: passes through at once
        retrying(refused, 10, "read x")


def _wrapped(cause: BaseException) -> optuna.exceptions.StorageInternalError:
    """What Optuna's RDB storage raises: its StorageInternalError from the SQLAlchemy error."""
    try:
        raise optuna.exceptions.StorageInternalError("An exception is raised during the commit.") from cause
    except optuna.exceptions.StorageInternalError as e:
        return e


def test_a_cut_connection_is_transient_in_every_shape_a_storm_produces():
    """The chains seen while every backend was terminated every 0.05 s (benchmarks/storage_storm.py):
    the cut itself, and the PendingRollbackError of the next call on that session (which then
    reconnects). A query the database refused is not transient. A StorageError made of a transient
    error is retried too (a read wrapped in ``storage_errors``)."""
    admin = OperationalError("SELECT 1", {}, Exception("terminating connection due to administrator command"))
    pending = PendingRollbackError("Can't reconnect until invalid transaction is rolled back.")
    pending.__cause__ = admin
    assert is_transient(admin) and is_transient(pending)
    assert is_transient(_wrapped(admin)) and is_transient(_wrapped(pending))
    assert not is_transient(_wrapped(IntegrityError("INSERT", {}, Exception("duplicate key"))))
    assert storage_error("sqlite://", "read x", _wrapped(pending)).transient
    assert not storage_error("sqlite://", "read x", ValueError("bad")).transient
    calls = {"n": 0}

    def cut_then_ok() -> str:
        calls["n"] += 1
        if calls["n"] == 1:
            raise storage_error("sqlite://", "read x", _wrapped(pending))
        return "ok"

    assert retrying(cut_then_ok, 10, "read x") == "ok" and calls["n"] == 2


def test_workers_in_threads_share_one_budget(url, monkeypatch, tmp_path):
    monkeypatch.setenv(
        "NOVA_HEARTBEAT_INTERVAL", "1"
    )  # a worker that finds the budget spent re-checks each beat
    study, spec = make(url, 6)
    monkeypatch.setattr(worker, "run_trial", lambda trial, ctx: [float(trial.number), 1.0])
    ran: list[int] = []

    def one() -> None:
        s, sp = nova_study.load("w", url)
        ran.append(worker.run_worker(s, sp, worker.WorkerOptions(artifacts_dir=str(tmp_path / "a"))))

    threads = [threading.Thread(target=one) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(ran) == 6 and len(study.get_trials()) == 6


def test_an_orphaned_retry_is_queued_again_and_the_budget_stays_exact(url):
    """A storm can lose the answer to an ask twice for one configuration: the orphan's retry is itself
    orphaned. Stale trials are re-queued once; an orphan never ran, so it is re-queued every time and
    neither orphan counts toward the budget (a CI storm once ended 7 COMPLETE of a budget of 8)."""
    study, spec = make(url, 2)
    storage = worker.rdb_storage(study)
    first = study.ask()
    requeue_orphan(study, storage.get_trial(first._trial_id))
    storage.set_trial_state_values(first._trial_id, state=TrialState.FAIL)
    retry = study.ask()  # pops the WAITING retry
    assert storage.get_trial(retry._trial_id).system_attrs[schema.RETRY_OF] == first.number
    requeue_orphan(study, storage.get_trial(retry._trial_id))  # orphaned again
    storage.set_trial_state_values(retry._trial_id, state=TrialState.FAIL)
    trials = study.get_trials()
    (again,) = [t for t in trials if t.state == TrialState.WAITING]
    assert again.system_attrs[schema.RETRY_OF] == retry.number
    assert again.system_attrs["retry_history"] == [first.number, retry.number]
    assert count_toward_budget(trials) == 0  # both orphans replaced, the retry still waiting
