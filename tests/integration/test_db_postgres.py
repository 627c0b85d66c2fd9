"""nova's tables on the real PostgreSQL server, next to Optuna's schema.

Each test gets a fresh, uniquely named database (``nova_t_<random>``) created on the ``postgres``
database and dropped afterwards. The server is ``NOVA_TEST_PG`` or the local default; when it
cannot be reached the tests fail, they do not skip.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import traceback
import uuid
from collections.abc import Iterator
from dataclasses import replace

import alembic.command
import optuna
import psycopg
import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from psycopg import sql
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import make_url

from nova_search.db import (
    BEST_AT_CONCURRENCY_SQL,
    Base,
    LevelStore,
    current,
    downgrade,
    upgrade,
)
from nova_search.db.migrate import VERSION_TABLE, alembic_config, head_revision, include_object
from nova_search.errors import StorageError
from nova_search.metrics import LevelResult
from nova_search.study import mask_url

pytestmark = pytest.mark.postgres

PG_URL = os.environ.get("NOVA_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
NOVA_TABLES = {"nova_level_result", VERSION_TABLE}


# --- fixtures ---


def _admin() -> psycopg.Connection:
    u = make_url(PG_URL)
    try:
        return psycopg.connect(
            host=u.host or "127.0.0.1",
            port=u.port or 5432,
            user=u.username,
            password=u.password,
            dbname="postgres",
            autocommit=True,
            connect_timeout=10,
        )
    except psycopg.OperationalError as e:
        pytest.fail(
            f"PostgreSQL at {mask_url(PG_URL)} is unreachable ({type(e).__name__}); "
            "these tests need it (set NOVA_TEST_PG)"
        )


@pytest.fixture
def pg_url() -> Iterator[str]:
    name = f"nova_t_{uuid.uuid4().hex[:16]}"
    with _admin() as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield make_url(PG_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        with _admin() as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                (name,),
            )
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


# --- helpers ---


def level(
    concurrency: int = 64, *, ttft_p99: float | None = 300.0, throughput: float = 1000.0
) -> LevelResult:
    return LevelResult(
        concurrency=concurrency,
        requests=100,
        completed=99,
        errors=1,
        error_rate=0.01,
        duration_s=30.0,
        input_tokens=12_000,
        output_tokens=30_000,
        output_throughput=throughput,
        total_token_throughput=throughput * 1.4,
        request_throughput=3.3,
        ttft_p99_ms=ttft_p99,
        tpot_p99_ms=25.0,
        spec_accepted_per_pos=[0.9, 0.7],
        first_errors=["HTTP 500"],
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


class TcpProxy:
    """A loopback TCP forwarder that can be stopped (every connection cut, like a server restart)
    and started again on the same port."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self._running = False
        self._socks: list[socket.socket] = []
        self._lock = threading.Lock()

    def start(self) -> TcpProxy:
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._listener.settimeout(0.05)
        self._running = True
        threading.Thread(target=self._accept, args=(self._listener,), daemon=True).start()
        return self

    def stop(self) -> None:
        self._running = False
        self._listener.close()
        with self._lock:
            socks, self._socks = self._socks, []
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def _accept(self, listener: socket.socket) -> None:
        while self._running:
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(None)
            upstream = socket.create_connection(self.target)
            with self._lock:
                self._socks += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


# --- migrations ---


def test_upgrade_from_empty_creates_optuna_and_nova_schemas(pg_url: str) -> None:
    assert tables(pg_url) == set()
    upgrade(pg_url)
    names = tables(pg_url)
    assert {"studies", "trials", "trial_values", "alembic_version"} | NOVA_TABLES <= names
    assert scalar(pg_url, "SELECT version_num FROM alembic_version") == optuna_head(pg_url)
    assert scalar(pg_url, f"SELECT version_num FROM {VERSION_TABLE}") == "0002"
    assert current(pg_url) == head_revision() == "0002"
    upgrade(pg_url)  # idempotent
    assert tables(pg_url) == names


def test_downgrade_to_base_drops_only_nova_table_then_upgrade_again(pg_url: str) -> None:
    upgrade(pg_url)
    before = tables(pg_url)
    optuna_rev = scalar(pg_url, "SELECT version_num FROM alembic_version")
    downgrade(pg_url, "base")
    assert before - tables(pg_url) == {"nova_level_result"}
    assert current(pg_url) is None
    assert scalar(pg_url, "SELECT version_num FROM alembic_version") == optuna_rev
    upgrade(pg_url)
    assert tables(pg_url) == before and current(pg_url) == "0002"


def test_study_created_before_the_migration_survives_the_round_trip(pg_url: str) -> None:
    storage = optuna.storages.RDBStorage(pg_url)
    study = optuna.create_study(storage=storage, study_name="early", directions=["maximize"])
    study.set_user_attr("nova:spec", {"name": "early"})
    study.optimize(lambda t: t.suggest_float("x", 0.0, 1.0), n_trials=3)
    expected = [(t.number, t.params, t.values, t.state) for t in study.trials]
    storage.engine.dispose()

    upgrade(pg_url)
    with LevelStore(pg_url) as store:
        record(store, study.trials[0]._trial_id, level(), study="early")
    downgrade(pg_url, "base")
    upgrade(pg_url)

    storage = optuna.storages.RDBStorage(pg_url)
    loaded = optuna.load_study(study_name="early", storage=storage)
    assert [(t.number, t.params, t.values, t.state) for t in loaded.trials] == expected
    assert loaded.user_attrs == {"nova:spec": {"name": "early"}}
    storage.engine.dispose()
    with LevelStore(pg_url) as store:
        assert store.rows("early") == []  # the round trip dropped nova's rows, nothing else


NEW_IN_0002 = ("goodput", "goodput_rate", "ttft_p999_ms", "tpot_p999_ms", "itl_p999_ms", "e2e_p999_ms")
ROW_AT_0001 = (
    "INSERT INTO nova_level_result (trial_id, study_name, trial_number, concurrency, output_throughput, "
    "profile, engine_metrics, worker_host, gpu_ids, argv) "
    "VALUES (3, 's', 0, 4, 12.5, '{}', '{}', 'h', '0', '[]')"
)


def columns(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        return {c["name"] for c in inspect(engine).get_columns("nova_level_result")}
    finally:
        engine.dispose()


def test_0002_adds_the_goodput_and_p999_columns_and_keeps_rows(pg_url: str) -> None:
    upgrade(pg_url, "0001")
    assert current(pg_url) == "0001" and not set(NEW_IN_0002) & columns(pg_url)
    engine = create_engine(pg_url)
    with engine.begin() as conn:
        conn.execute(text(ROW_AT_0001))
    engine.dispose()
    upgrade(pg_url)
    assert current(pg_url) == "0002" and set(NEW_IN_0002) <= columns(pg_url)
    with LevelStore(pg_url) as store:
        store.check_ready()
        (old,) = store.rows("s")
        assert old["output_throughput"] == 12.5 and all(old[c] is None for c in NEW_IN_0002)
        record(store, 4, replace(level(8), goodput=2.5, goodput_rate=0.75, ttft_p999_ms=900.0))
        new = store.rows("s")[1]
    assert (new["goodput"], new["goodput_rate"], new["ttft_p999_ms"]) == (2.5, 0.75, 900.0)
    downgrade(pg_url, "0001")
    assert current(pg_url) == "0001" and not set(NEW_IN_0002) & columns(pg_url)
    with LevelStore(pg_url) as store, pytest.raises(StorageError, match="revision '0001'"):
        store.check_ready()
    engine = create_engine(pg_url)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM nova_level_result")).scalar_one() == 2
    engine.dispose()


def test_models_and_migration_agree(pg_url: str) -> None:
    upgrade(pg_url)
    engine = create_engine(pg_url)
    with engine.connect() as conn:
        opts = {"compare_type": True, "version_table": VERSION_TABLE}
        filtered = MigrationContext.configure(conn, opts={**opts, "include_object": include_object})
        assert compare_metadata(filtered, Base.metadata) == []
        # without the filter autogenerate would want to drop Optuna's tables: the filter matters
        unfiltered = compare_metadata(MigrationContext.configure(conn, opts=opts), Base.metadata)
        assert ("remove_table", "trials") in {(d[0], d[1].name) for d in unfiltered if isinstance(d, tuple)}
    engine.dispose()
    alembic.command.check(alembic_config(pg_url))


# --- the store ---


def test_record_is_an_idempotent_upsert(pg_url: str) -> None:
    upgrade(pg_url)
    with LevelStore(pg_url) as store:
        store.check_ready()
        record(store, 11, level(64, throughput=1000.0))
        (first,) = store.rows("s")
        record(store, 11, level(64, throughput=1250.0, ttft_p99=410.0))
        (row,) = store.rows("s")
    assert (row["id"], row["created_at"]) == (first["id"], first["created_at"])
    assert row["output_throughput"] == 1250.0 and row["ttft_p99_ms"] == 410.0
    assert row["profile"]["output_throughput"] == 1250.0
    assert row["profile"]["spec_accepted_per_pos"] == [0.9, 0.7]
    assert row["engine_metrics"]["vllm:kv_cache_usage_perc"] == 0.5
    assert row["argv"][-2:] == ["--max-num-seqs", "64"]
    assert (row["worker_host"], row["gpu_ids"], row["gpu_name"]) == ("node-1", "0,1", "NVIDIA H200")
    assert row["created_at"].tzinfo is not None


def test_concurrent_writes_of_one_level_leave_one_row(pg_url: str) -> None:
    upgrade(pg_url)
    with LevelStore(pg_url) as store:
        threads = [
            threading.Thread(target=record, args=(store, 5, level(throughput=float(i)))) for i in range(8)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(store.rows("s")) == 1


def test_check_ready_names_the_fix_when_tables_are_missing(pg_url: str) -> None:
    with LevelStore(pg_url) as store:
        with pytest.raises(
            StorageError,
            match=r"nova's tables are missing in postgresql\+psycopg://"
            ".*run `nova-search db upgrade --storage URL`",
        ):
            store.check_ready()
        with pytest.raises(StorageError, match="missing"):
            record(store, 1, level())


def test_a_write_survives_a_server_restart(pg_url: str) -> None:
    upgrade(pg_url)
    real = make_url(pg_url)
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
    proxy.stop()
    with LevelStore(pg_url) as store:
        assert [r["concurrency"] for r in store.rows("s")] == [16, 32]


def test_a_write_gives_up_after_the_retry_window(pg_url: str) -> None:
    upgrade(pg_url)
    real = make_url(pg_url)
    proxy = TcpProxy((real.host or "127.0.0.1", real.port or 5432)).start()
    via_proxy = real.set(port=proxy.port).render_as_string(hide_password=False)
    with LevelStore(via_proxy, retry_window_s=1.0) as store:
        record(store, 1, level(16))
        proxy.stop()
        t0 = time.monotonic()
        with pytest.raises(StorageError, match="after .* attempts over 1 s: OperationalError"):
            record(store, 1, level(32))
        assert time.monotonic() - t0 < 10


# --- plain SQL ---


def test_best_configuration_at_concurrency_64_under_500ms_ttft_p99(pg_url: str) -> None:
    upgrade(pg_url)
    storage = optuna.storages.RDBStorage(pg_url)
    study = optuna.create_study(storage=storage, study_name="s", direction="maximize")
    other = optuna.create_study(storage=storage, study_name="other", direction="maximize")
    trials = [study.ask() for _ in range(5)]
    for t in trials[:3]:
        study.tell(t, 1.0)
    study.tell(trials[3], state=optuna.trial.TrialState.FAIL)  # trials[4] stays RUNNING
    o = other.ask()
    other.tell(o, 1.0)
    ids = [t._trial_id for t in trials]
    with LevelStore(pg_url) as store:
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

    engine = create_engine(pg_url)
    with engine.connect() as conn:

        def best(limit: float, concurrency: int = 64) -> object:
            return conn.execute(
                text(BEST_AT_CONCURRENCY_SQL),
                {"study": "s", "concurrency": concurrency, "ttft_p99_ms": limit},
            ).first()

        row = best(500.0)
        assert row is not None
        assert (row.trial_id, row.trial_number, row.output_throughput) == (ids[1], 1, 1500.0)
        assert row.argv[0] == "vllm" and row.ttft_p99_ms == 450.0
        assert best(420.0).trial_number == 0
        assert best(50.0) is None
        assert best(50.0, concurrency=32).trial_number == 0
    engine.dispose()


# --- secrets ---


def test_errors_never_show_the_password() -> None:
    url = "postgresql+psycopg://postgres:hunter2@127.0.0.1:1/x"
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
        assert "postgres:***@127.0.0.1:1/x" in str(e.value)
