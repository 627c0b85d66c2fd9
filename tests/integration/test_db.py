"""nova's tables next to Optuna's schema, on every storage backend (``storage_url``: a SQLite file and
a fresh database on the real PostgreSQL server), one body per test; then what only one backend has
(PostgreSQL: concurrent writers, a server restart; SQLite: the plain alembic CLI from a clone)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import fields, replace

import alembic.command
import optuna
import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Integer, create_engine, inspect, text
from sqlalchemy.engine import make_url

from nova_search import schema
from nova_search.db import (
    BEST_AT_CONCURRENCY_SQL,
    Base,
    LevelResultRow,
    LevelStore,
    StorageLock,
    current,
    downgrade,
    upgrade,
)
from nova_search.db.migrate import VERSION_TABLE, alembic_config, head_revision, include_object
from nova_search.db.store import _upsert_portable
from nova_search.db.tables import METRIC_COLUMNS
from nova_search.errors import StorageError
from nova_search.measure.metrics import METRIC_NAMES, LevelResult
from nova_search.testing.pg import SHARED as PG_URL
from nova_search.testing.pg import fresh_database
from tests.support import REPO, builders
from tests.support.net import TcpProxy

NOVA_TABLES = {"nova_level_result", VERSION_TABLE}
HEAD = "0003"
#: columns each revision added, and a row as revision 0001 wrote it
ADDED = {
    "0002": ("goodput", "goodput_rate", "ttft_p999_ms", "tpot_p999_ms", "itl_p999_ms", "e2e_p999_ms"),
    "0003": tuple(
        f"{m}_{s}_ms" for m in ("ttft", "tpot", "itl", "e2e") for s in ("p95", "std", "min", "max")
    ),
}
ROW_AT_0001 = (
    "INSERT INTO nova_level_result (trial_id, study_name, trial_number, concurrency, output_throughput, "
    "profile, engine_metrics, worker_host, gpu_ids, argv) "
    "VALUES (3, 's', 0, 4, 12.5, '{}', '{}', 'h', '0', '[]')"
)


def level(
    concurrency: int = 64, *, ttft_p99: float | None = 300.0, throughput: float = 1000.0
) -> LevelResult:
    return builders.level(
        concurrency, throughput, ttft_p99, spec_accepted_per_pos=[0.9, 0.7], first_errors=["HTTP 500"]
    )


def record(store: LevelStore, trial_id: int, lv: LevelResult, *, study: str = "s", number: int = 0) -> None:
    store.record(
        trial_id=trial_id,
        study_name=study,
        trial_number=number,
        level=lv,
        engine_metrics={"vllm:num_requests_running": 3.0, "vllm:kv_cache_usage_perc": 0.5},
        worker_host="node-1",
        gpu_ids="0,1",
        gpu_name="NVIDIA H200",
        engine_version="0.11.0",
        argv=["vllm", "serve", "m", "--max-num-seqs", "64"],
    )


def tables(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def columns(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        return {c["name"] for c in inspect(engine).get_columns("nova_level_result")}
    finally:
        engine.dispose()


def scalar(url: str, query: str) -> object:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return conn.execute(text(query)).scalar_one()
    finally:
        engine.dispose()


def optuna_head(url: str) -> str:
    storage = optuna.storages.RDBStorage(url)
    try:
        return storage.get_head_version()
    finally:
        storage.engine.dispose()


# ---------------------------------------------------------------- the models (no database)


def test_model_columns_cover_every_metric_with_its_type() -> None:
    assert METRIC_COLUMNS == METRIC_NAMES
    types = {f.name: f.type for f in fields(LevelResult)}
    cols = LevelResultRow.__table__.columns
    for name in METRIC_NAMES:
        assert cols[name].nullable
        assert isinstance(cols[name].type, Integer) == (types[name] == "int"), name


def test_include_object_keeps_autogenerate_inside_nova_tables() -> None:
    assert include_object(None, "nova_level_result", "table", True, None)
    assert not include_object(None, "trials", "table", True, None)
    assert not include_object(None, "alembic_version", "table", True, None)
    assert not include_object(None, VERSION_TABLE, "table", True, None)
    index = next(iter(LevelResultRow.__table__.indexes))
    assert include_object(index, index.name, "index", False, None)


# ---------------------------------------------------------------- migrations, every backend


def test_upgrade_from_empty_creates_optuna_and_nova_schemas(storage_url: str) -> None:
    assert tables(storage_url) == set()
    upgrade(storage_url)
    names = tables(storage_url)
    assert {"studies", "trials", "trial_values", "alembic_version"} | NOVA_TABLES <= names
    assert scalar(storage_url, "SELECT version_num FROM alembic_version") == optuna_head(storage_url)
    assert current(storage_url) == head_revision() == HEAD
    upgrade(storage_url)  # idempotent
    assert tables(storage_url) == names


def test_downgrade_to_base_drops_only_nova_table_then_upgrade_again(storage_url: str) -> None:
    upgrade(storage_url)
    before = tables(storage_url)
    optuna_rev = scalar(storage_url, "SELECT version_num FROM alembic_version")
    downgrade(storage_url, "base")
    assert before - tables(storage_url) == {"nova_level_result"}
    assert current(storage_url) is None
    assert scalar(storage_url, "SELECT version_num FROM alembic_version") == optuna_rev
    upgrade(storage_url)
    assert tables(storage_url) == before and current(storage_url) == HEAD


def test_study_created_before_the_migration_survives_the_round_trip(storage_url: str) -> None:
    storage = optuna.storages.RDBStorage(storage_url)
    study = optuna.create_study(storage=storage, study_name="early", directions=["maximize"])
    study.set_user_attr(schema.SPEC.key, {"name": "early"})
    study.optimize(lambda t: t.suggest_float("x", 0.0, 1.0), n_trials=3)
    expected = [(t.number, t.params, t.values, t.state) for t in study.trials]
    storage.engine.dispose()

    upgrade(storage_url)
    with LevelStore(storage_url) as store:
        record(store, study.trials[0]._trial_id, level(), study="early")
    downgrade(storage_url, "base")
    upgrade(storage_url)

    storage = optuna.storages.RDBStorage(storage_url)
    loaded = optuna.load_study(study_name="early", storage=storage)
    assert [(t.number, t.params, t.values, t.state) for t in loaded.trials] == expected
    assert loaded.user_attrs == {schema.SPEC.key: {"name": "early"}}
    storage.engine.dispose()
    with LevelStore(storage_url) as store:
        assert store.rows("early") == []  # the round trip dropped nova's rows, nothing else


@pytest.mark.parametrize("revision", sorted(ADDED))
def test_each_revision_adds_its_columns_and_keeps_rows(storage_url: str, revision: str) -> None:
    before = f"{int(revision) - 1:04d}"
    upgrade(storage_url, before)
    assert current(storage_url) == before and not set(ADDED[revision]) & columns(storage_url)
    if before == "0001":
        engine = create_engine(storage_url)
        with engine.begin() as conn:
            conn.execute(text(ROW_AT_0001))
        engine.dispose()
    upgrade(storage_url, revision)
    assert current(storage_url) == revision and set(ADDED[revision]) <= columns(storage_url)
    upgrade(storage_url)
    with LevelStore(storage_url) as store:
        store.check_ready()
        old = store.rows("s")
        assert [r["output_throughput"] for r in old] == ([12.5] if before == "0001" else [])
        assert all(r[c] is None for r in old for c in ADDED[revision])
        new_values = {c: 1.5 for c in ADDED[revision]}
        record(store, 4, replace(level(8), **new_values))
        new = store.rows("s")[-1]
    assert all(new[c] == 1.5 for c in ADDED[revision])
    downgrade(storage_url, before)
    assert current(storage_url) == before and not set(ADDED[revision]) & columns(storage_url)
    with LevelStore(storage_url) as store, pytest.raises(StorageError, match=f"revision '{before}'"):
        store.check_ready()
    assert scalar(storage_url, "SELECT count(*) FROM nova_level_result") == len(old) + 1


def test_models_and_migration_agree(storage_url: str) -> None:
    upgrade(storage_url)
    engine = create_engine(storage_url)
    with engine.connect() as conn:
        opts = {"compare_type": True, "version_table": VERSION_TABLE}
        filtered = MigrationContext.configure(conn, opts={**opts, "include_object": include_object})
        assert compare_metadata(filtered, Base.metadata) == []
        # without the filter autogenerate would want to drop Optuna's tables: the filter matters
        unfiltered = compare_metadata(MigrationContext.configure(conn, opts=opts), Base.metadata)
        assert ("remove_table", "trials") in {(d[0], d[1].name) for d in unfiltered if isinstance(d, tuple)}
    engine.dispose()
    alembic.command.check(alembic_config(storage_url))  # raises when autogenerate would emit anything


def test_two_upgrades_at_once_on_an_empty_database_both_succeed(storage_url: str) -> None:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            upgrade(storage_url)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and current(storage_url) == HEAD


def test_unknown_revision_is_a_storage_error(storage_url: str) -> None:
    with pytest.raises(StorageError, match="nope"):
        upgrade(storage_url, "nope")


# ---------------------------------------------------------------- the store, every backend


def test_record_is_an_idempotent_upsert(storage_url: str) -> None:
    upgrade(storage_url)
    with LevelStore(storage_url) as store:
        store.check_ready()
        record(store, 11, level(64, throughput=1000.0))
        (first,) = store.rows("s")
        record(store, 11, level(64, throughput=1250.0, ttft_p99=float("nan")))
        record(store, 11, level(32))
        rows = store.rows("s")
    assert [r["concurrency"] for r in rows] == [32, 64]
    row = rows[1]
    assert (row["id"], row["created_at"]) == (first["id"], first["created_at"])
    assert row["output_throughput"] == 1250.0 and row["profile"]["output_throughput"] == 1250.0
    assert row["ttft_p99_ms"] is None and row["profile"]["ttft_p99_ms"] is None  # NaN is stored as NULL
    assert row["profile"]["spec_accepted_per_pos"] == [0.9, 0.7]
    assert row["engine_metrics"]["vllm:kv_cache_usage_perc"] == 0.5
    assert row["argv"][-2:] == ["--max-num-seqs", "64"]
    assert (row["worker_host"], row["gpu_ids"], row["gpu_name"]) == ("node-1", "0,1", "NVIDIA H200")
    assert isinstance(row["requests"], int) and isinstance(row["input_tokens"], int)


def test_gpu_ids_sequence_and_non_finite_engine_metrics(storage_url: str) -> None:
    upgrade(storage_url)
    with LevelStore(storage_url) as store:
        store.record(
            trial_id=1,
            study_name="s",
            trial_number=0,
            level=level(),
            worker_host="h",
            engine_metrics={"a": math.inf, "b": 2.0},
            gpu_ids=(0, 3),
            gpu_name=None,
            engine_version=None,
            argv=("x",),
        )
        (row,) = store.rows("s")
    assert row["gpu_ids"] == "0,3" and row["engine_metrics"] == {"a": None, "b": 2.0}
    assert row["gpu_name"] is None and row["engine_version"] is None and row["argv"] == ["x"]


def test_portable_upsert_for_other_dialects(storage_url: str) -> None:
    upgrade(storage_url)
    with LevelStore(storage_url) as store:
        record(store, 9, level(8, throughput=1.0))
        values = {**store.rows("s")[0]}
        for k in ("id", "created_at"):
            values.pop(k)
        values["output_throughput"] = 2.0
        _upsert_portable(store._engine, values)
        _upsert_portable(store._engine, {**values, "concurrency": 16})
        rows = store.rows("s")
    assert [(r["concurrency"], r["output_throughput"]) for r in rows] == [(8, 2.0), (16, 2.0)]


def test_missing_tables_are_named_with_the_fix(storage_url: str) -> None:
    dialect = make_url(storage_url).get_backend_name()
    with LevelStore(storage_url, retry_window_s=30) as store:
        with pytest.raises(
            StorageError,
            match=f"nova's tables are missing in {dialect}.*run `nova-search db upgrade --storage URL`",
        ):
            store.check_ready()
        with pytest.raises(StorageError, match="missing"):  # at once, not after the retry window
            record(store, 1, level())


def test_an_outdated_schema_is_refused(storage_url: str) -> None:
    upgrade(storage_url)
    engine = create_engine(storage_url)
    with engine.begin() as conn:
        conn.execute(text(f"UPDATE {VERSION_TABLE} SET version_num = 'old'"))
    engine.dispose()
    with LevelStore(storage_url) as store, pytest.raises(StorageError, match="revision 'old'"):
        store.check_ready()


def test_best_configuration_at_concurrency_64_under_500ms_ttft_p99(storage_url: str) -> None:
    upgrade(storage_url)
    storage = optuna.storages.RDBStorage(storage_url)
    study = optuna.create_study(storage=storage, study_name="s", direction="maximize")
    other = optuna.create_study(storage=storage, study_name="other", direction="maximize")
    trials = [study.ask() for _ in range(5)]
    for t in trials[:3]:
        study.tell(t, 1.0)
    study.tell(trials[3], state=optuna.trial.TrialState.FAIL)  # trials[4] stays RUNNING
    o = other.ask()
    other.tell(o, 1.0)
    ids = [t._trial_id for t in trials]
    with LevelStore(storage_url) as store:
        record(store, ids[0], level(64, ttft_p99=400.0, throughput=1000.0), number=0)
        record(store, ids[1], level(64, ttft_p99=450.0, throughput=1500.0), number=1)
        record(store, ids[2], level(64, ttft_p99=700.0, throughput=3000.0), number=2)  # too slow
        record(store, ids[3], level(64, ttft_p99=100.0, throughput=5000.0), number=3)  # FAIL
        record(store, ids[4], level(64, ttft_p99=100.0, throughput=6000.0), number=4)  # RUNNING
        record(store, ids[0], level(32, ttft_p99=10.0, throughput=9000.0), number=0)  # other level
        record(store, ids[1], level(64, ttft_p99=None, throughput=9000.0), number=1)  # upsert: NULL
        record(store, ids[1], level(64, ttft_p99=450.0, throughput=1500.0), number=1)
        record(store, o._trial_id, level(64, ttft_p99=1.0, throughput=9999.0), study="other")
    storage.engine.dispose()

    engine = create_engine(storage_url)
    with engine.connect() as conn:

        def best(limit: float, concurrency: int = 64) -> object:
            return conn.execute(
                text(BEST_AT_CONCURRENCY_SQL),
                {"study": "s", "concurrency": concurrency, "ttft_p99_ms": limit},
            ).first()

        row = best(500.0)
        assert row is not None
        assert (row.trial_id, row.trial_number, row.output_throughput) == (ids[1], 1, 1500.0)
        assert row.ttft_p99_ms == 450.0
        assert best(420.0).trial_number == 0
        assert best(50.0) is None
        assert best(50.0, concurrency=32).trial_number == 0
    engine.dispose()


# ---------------------------------------------------------------- PostgreSQL only


@pytest.mark.postgres
def test_concurrent_writes_of_one_level_leave_one_row() -> None:
    with fresh_database() as url:
        upgrade(url)
        with LevelStore(url) as store:
            threads = [
                threading.Thread(target=record, args=(store, 5, level(throughput=float(i)))) for i in range(8)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert len(store.rows("s")) == 1


@pytest.mark.postgres
def test_a_write_survives_a_server_restart_and_gives_up_after_the_window() -> None:
    with fresh_database() as url:
        upgrade(url)
        real = make_url(url)
        proxy = TcpProxy((real.host or "127.0.0.1", real.port or 5432)).start()
        via_proxy = real.set(port=proxy.port).render_as_string(hide_password=False)
        with LevelStore(via_proxy, retry_window_s=30) as store:
            store.check_ready()
            record(store, 1, level(16))
            proxy.stop()  # every connection cut, nothing listening: the server is "restarting"
            threading.Timer(2.0, proxy.start).start()
            t0 = time.monotonic()
            record(store, 1, level(32))
            assert time.monotonic() - t0 >= 1.5  # it waited for the server, then wrote
        with LevelStore(via_proxy, retry_window_s=1.0) as store:
            proxy.stop()
            t0 = time.monotonic()
            with pytest.raises(StorageError, match="after .* attempts over 1 s: OperationalError"):
                record(store, 1, level(64))
            assert time.monotonic() - t0 < 10
        with LevelStore(url) as store:
            assert [r["concurrency"] for r in store.rows("s")] == [16, 32]


@pytest.mark.postgres
def test_errors_never_show_the_password(monkeypatch: pytest.MonkeyPatch) -> None:
    # nothing listens on port 1: every call gives up when its retry window ends (300 s by default, which
    # made this test wait 300 s for upgrade alone); the window's own bound is test_silent_storage's
    monkeypatch.setenv("NOVA_STORAGE_RETRY_S", "0.5")
    url = make_url(PG_URL).set(password="hunter2", port=1).render_as_string(hide_password=False)
    calls = [
        lambda: upgrade(url),
        lambda: downgrade(url, "base"),
        lambda: current(url),
        lambda: LevelStore(url).check_ready(),
        lambda: record(LevelStore(url, retry_window_s=0.3), 1, level()),
        lambda: LevelStore(url, retry_window_s=0.3).rows("s"),
    ]
    for call in calls:
        with pytest.raises(StorageError) as e:
            call()
        shown = "".join(traceback.format_exception(e.value))
        assert "hunter2" not in shown, shown
        assert ":***@127.0.0.1:1/" in str(e.value)


# ---------------------------------------------------------------- SQLite only


def test_bad_urls_raise_storage_error(tmp_path) -> None:
    with pytest.raises(StorageError, match="not a SQLAlchemy URL"):
        upgrade("not a url")
    with pytest.raises(StorageError, match="not a SQLAlchemy URL"):
        LevelStore("::nope::")
    with pytest.raises(StorageError) as e:
        upgrade("nosuchdialect://u:s3cret@h/db")
    assert "s3cret" not in str(e.value) and "***" in str(e.value)
    with pytest.raises(StorageError):
        upgrade(f"sqlite:///{tmp_path / 'no' / 'such' / 'dir' / 'x.db'}")


def test_plain_alembic_cli_with_x_url_and_env(tmp_path) -> None:
    """The developer path: `alembic -x url=... upgrade head` from the repo root, alembic.ini."""
    db = tmp_path / "cli.db"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("NOVA_STORAGE", None)
    alembic_cli = [sys.executable, "-m", "alembic"]
    subprocess.run(
        [*alembic_cli, "-x", f"url=sqlite:///{db}", "upgrade", "head"],
        cwd=REPO,
        env=env,
        check=True,
        capture_output=True,
    )
    assert current(f"sqlite:///{db}") == HEAD
    out = subprocess.run(
        [*alembic_cli, "current"],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
        env={**env, "NOVA_STORAGE": f"sqlite:///{db}"},
    )
    assert HEAD in out.stdout
    no_url = subprocess.run([*alembic_cli, "current"], cwd=REPO, env=env, capture_output=True, text=True)
    assert no_url.returncode != 0 and "no database URL" in no_url.stderr


@pytest.mark.postgres
def test_a_cut_connection_at_the_readiness_check_is_transient() -> None:
    """The worker's first look at nova's tables is retried through a connection storm (the storm
    benchmark once saw a worker exit 1 at start-up: the check's error was not retryable)."""
    url = make_url(PG_URL).set(port=1).render_as_string(hide_password=False)
    with pytest.raises(StorageError) as e:
        LevelStore(url).check_ready()
    assert e.value.transient and "cannot reach" in str(e.value)


# ---------------------------------------------------------------- the budget lock (db.StorageLock)

HOLDER = """
import pathlib, sys, time
from sqlalchemy import create_engine
from nova_search.db import StorageLock

url, ready, n, me = sys.argv[1], pathlib.Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
engine = create_engine(url)
(ready / me).touch()
while len(list(ready.iterdir())) < n:  # every holder imported and ready: they contend at once
    time.sleep(0.01)
with StorageLock(engine, "nova-search#budget"):
    entered = time.monotonic()
    time.sleep(0.3)
    print(entered, time.monotonic())
"""


def test_the_lock_lets_one_process_in_at_a_time(storage_url: str, tmp_path) -> None:
    """Workers are processes (on one host for SQLite, on many for PostgreSQL): filelock's file
    beside the SQLite database, PostgreSQL's advisory lock."""
    upgrade(storage_url)
    ready = tmp_path / "ready"
    ready.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", HOLDER, storage_url, str(ready), "3", str(i)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(3)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err for _, err in outs]
    held = sorted(tuple(float(x) for x in out.split()) for out, _ in outs)
    assert len(held) == 3
    assert all(held[i][1] <= held[i + 1][0] for i in range(2)), held


def test_attempt_takes_a_free_lock_at_once_and_never_waits_for_a_held_one(storage_url: str) -> None:
    """``attempt`` (the dashboard notes' election): True and held when free, False and holding nothing
    when another holds it; released, the lock is free for the next."""
    engine = create_engine(storage_url)
    first, second = StorageLock(engine, "nova-search#notes"), StorageLock(engine, "nova-search#notes")
    assert first.attempt()
    started = time.monotonic()
    assert second.attempt() is False
    assert time.monotonic() - started < 5  # it did not wait for the holder
    first.release()
    assert second.attempt()
    second.release()
    engine.dispose()


@pytest.mark.postgres
def test_an_advisory_lock_on_a_cut_connection_is_released_by_the_server() -> None:
    """A worker whose connection is cut while it holds the budget lock (a restart, a failover) does
    not keep it: the server ends the session, and with it the lock; leaving the section raises
    nothing, and the next worker gets the lock."""
    from nova_search.db import StorageLock

    with fresh_database() as url:
        real = make_url(url)
        proxy = TcpProxy((real.host or "127.0.0.1", real.port or 5432)).start()
        via_proxy = real.set(port=proxy.port).render_as_string(hide_password=False)
        cut_engine, engine = create_engine(via_proxy), create_engine(url)
        try:
            lock = StorageLock(cut_engine, "nova-search#budget")
            try_lock = text("SELECT pg_try_advisory_lock(:k)")
            with lock:
                with engine.connect() as conn:
                    assert conn.execute(try_lock, {"k": lock.key}).scalar_one() is False  # held
                proxy.stop()  # the holder's connection is cut
            got = threading.Event()

            def next_worker() -> None:
                with StorageLock(engine, "nova-search#budget"):
                    got.set()

            threading.Thread(target=next_worker, daemon=True).start()
            assert got.wait(30), "the lock of a cut connection was not released"
        finally:
            cut_engine.dispose()
            engine.dispose()
