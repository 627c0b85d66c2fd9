"""nova's tables on a SQLite file: alembic upgrade/downgrade next to Optuna's schema, the upsert."""

from __future__ import annotations

import math
import os
import sqlite3
import subprocess
import sys
from dataclasses import fields, replace
from pathlib import Path

import alembic.command
import optuna
import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Integer, create_engine, inspect, text

from nova_search.db import (
    BEST_AT_CONCURRENCY_SQL,
    Base,
    LevelResultRow,
    LevelStore,
    current,
    downgrade,
    upgrade,
)
from nova_search.db.migrate import VERSION_TABLE, alembic_config, head_revision, include_object
from nova_search.db.models import METRIC_COLUMNS
from nova_search.db.store import _upsert_portable
from nova_search.errors import StorageError
from nova_search.metrics import METRIC_NAMES, LevelResult

REPO = Path(__file__).resolve().parents[2]
NOVA_TABLES = {"nova_level_result", VERSION_TABLE}


def level(
    concurrency: int = 64, *, ttft_p99: float | None = 300.0, throughput: float = 1000.0, **extra: object
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
        **extra,  # type: ignore[arg-type]
    )


def record(store: LevelStore, trial_id: int, lv: LevelResult, *, study: str = "s", number: int = 0) -> None:
    store.record(
        trial_id=trial_id,
        study_name=study,
        trial_number=number,
        level=lv,
        engine_metrics={"vllm:num_requests_running": 3.0},
        worker_host="node-1",
        gpu_ids="0,1",
        gpu_name="NVIDIA H200",
        engine_version="0.11.0",
        argv=["vllm", "serve", "m"],
    )


def tables(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'study.db'}"


def test_model_columns_cover_every_metric_with_its_type() -> None:
    assert METRIC_COLUMNS == METRIC_NAMES
    types = {f.name: f.type for f in fields(LevelResult)}
    columns = LevelResultRow.__table__.columns
    for name in METRIC_NAMES:
        assert columns[name].nullable
        assert isinstance(columns[name].type, Integer) == (types[name] == "int"), name


def test_include_object_keeps_autogenerate_inside_nova_tables() -> None:
    assert include_object(None, "nova_level_result", "table", True, None)
    assert not include_object(None, "trials", "table", True, None)
    assert not include_object(None, "alembic_version", "table", True, None)
    assert not include_object(None, VERSION_TABLE, "table", True, None)
    index = next(iter(LevelResultRow.__table__.indexes))
    assert include_object(index, index.name, "index", False, None)


def test_upgrade_creates_optuna_and_nova_schemas(url: str) -> None:
    upgrade(url)
    names = tables(url)
    assert {"studies", "trials", "alembic_version"} | NOVA_TABLES <= names
    assert current(url) == head_revision() == "0002"
    engine = create_engine(url)
    with engine.connect() as conn:
        optuna_rev = conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one()
    engine.dispose()
    storage = optuna.storages.RDBStorage(url)
    assert optuna_rev == storage.get_head_version()
    storage.engine.dispose()
    upgrade(url)  # a second upgrade is a no-op
    assert current(url) == "0002"


def test_downgrade_drops_only_nova_table_then_upgrade_again(url: str) -> None:
    upgrade(url)
    before = tables(url)
    downgrade(url, "base")
    after = tables(url)
    assert before - after == {"nova_level_result"}
    assert current(url) is None
    upgrade(url)
    assert tables(url) == before


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


def test_0002_adds_the_goodput_and_p999_columns_and_keeps_rows(url: str) -> None:
    upgrade(url, "0001")
    assert current(url) == "0001" and not set(NEW_IN_0002) & columns(url)
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text(ROW_AT_0001))
    engine.dispose()
    upgrade(url)
    assert current(url) == "0002" and set(NEW_IN_0002) <= columns(url)
    with LevelStore(url) as store:
        store.check_ready()
        (old,) = store.rows("s")
        assert old["output_throughput"] == 12.5 and all(old[c] is None for c in NEW_IN_0002)
        record(store, 4, replace(level(8), goodput=2.5, goodput_rate=0.75, ttft_p999_ms=900.0))
        new = store.rows("s")[1]
    assert (new["goodput"], new["goodput_rate"], new["ttft_p999_ms"]) == (2.5, 0.75, 900.0)
    downgrade(url, "0001")
    assert current(url) == "0001" and not set(NEW_IN_0002) & columns(url)
    with LevelStore(url) as store, pytest.raises(StorageError, match="revision '0001'"):
        store.check_ready()
    engine = create_engine(url)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM nova_level_result")).scalar_one() == 2
    engine.dispose()


def test_models_and_migration_agree(url: str) -> None:
    upgrade(url)
    engine = create_engine(url)
    with engine.connect() as conn:
        ctx = MigrationContext.configure(
            conn,
            opts={
                "include_object": include_object,
                "compare_type": True,
                "version_table": VERSION_TABLE,
            },
        )
        assert compare_metadata(ctx, Base.metadata) == []
    engine.dispose()
    alembic.command.check(alembic_config(url))  # raises when autogenerate would emit anything


def test_record_is_an_idempotent_upsert(url: str) -> None:
    upgrade(url)
    with LevelStore(url) as store:
        store.check_ready()
        record(store, 7, level(64, throughput=1000.0))
        first = store.rows("s")
        record(store, 7, level(64, throughput=1200.0, ttft_p99=float("nan")))
        record(store, 7, level(32))
        rows = store.rows("s")
    assert [r["concurrency"] for r in rows] == [32, 64]
    row = rows[1]
    assert row["id"] == first[0]["id"] and row["created_at"] == first[0]["created_at"]
    assert row["output_throughput"] == 1200.0
    assert row["ttft_p99_ms"] is None  # NaN is stored as NULL
    assert row["profile"]["ttft_p99_ms"] is None and row["profile"]["output_throughput"] == 1200.0
    assert row["engine_metrics"] == {"vllm:num_requests_running": 3.0}
    assert row["argv"] == ["vllm", "serve", "m"] and row["gpu_ids"] == "0,1"
    assert isinstance(row["requests"], int) and isinstance(row["input_tokens"], int)


def test_gpu_ids_sequence_and_non_finite_engine_metrics(url: str) -> None:
    upgrade(url)
    with LevelStore(url) as store:
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


def test_portable_upsert_for_other_dialects(url: str) -> None:
    upgrade(url)
    with LevelStore(url) as store:
        record(store, 9, level(8, throughput=1.0))
        values = {**store.rows("s")[0]}
        for k in ("id", "created_at"):
            values.pop(k)
        values["output_throughput"] = 2.0
        _upsert_portable(store._engine, values)
        _upsert_portable(store._engine, {**values, "concurrency": 16})
        rows = store.rows("s")
    assert [(r["concurrency"], r["output_throughput"]) for r in rows] == [(8, 2.0), (16, 2.0)]


def test_missing_tables_are_named_with_the_fix(url: str) -> None:
    with LevelStore(url, retry_window_s=30) as store:
        with pytest.raises(
            StorageError,
            match="nova's tables are missing in sqlite:///.*run `nova-search db upgrade --storage URL`",
        ):
            store.check_ready()
        with pytest.raises(StorageError, match="missing"):  # at once, not after the retry window
            record(store, 1, level())


def test_outdated_schema_is_refused(url: str) -> None:
    upgrade(url)
    conn = sqlite3.connect(url.removeprefix("sqlite:///"))
    conn.execute(f"UPDATE {VERSION_TABLE} SET version_num = 'old'")
    conn.commit()
    conn.close()
    with LevelStore(url) as store, pytest.raises(StorageError, match="revision 'old'"):
        store.check_ready()


def test_bad_urls_raise_storage_error(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="not a SQLAlchemy URL"):
        upgrade("not a url")
    with pytest.raises(StorageError, match="not a SQLAlchemy URL"):
        LevelStore("::nope::")
    with pytest.raises(StorageError) as e:
        upgrade("nosuchdialect://u:s3cret@h/db")
    assert "s3cret" not in str(e.value) and "***" in str(e.value)
    missing_dir = tmp_path / "no" / "such" / "dir" / "x.db"
    with pytest.raises(StorageError):
        upgrade(f"sqlite:///{missing_dir}")


def test_unknown_revision_is_a_storage_error(url: str) -> None:
    with pytest.raises(StorageError, match="nope"):
        upgrade(url, "nope")


def test_best_at_concurrency_sql(url: str) -> None:
    upgrade(url)
    study = optuna.create_study(storage=url, study_name="s", direction="maximize")
    trials = [study.ask() for _ in range(4)]
    for t in trials[:3]:
        study.tell(t, 1.0)
    study.tell(trials[3], state=optuna.trial.TrialState.FAIL)
    with LevelStore(url) as store:
        record(store, trials[0]._trial_id, level(64, ttft_p99=400.0, throughput=1000.0), number=0)
        record(store, trials[1]._trial_id, level(64, ttft_p99=450.0, throughput=1500.0), number=1)
        record(store, trials[2]._trial_id, level(64, ttft_p99=700.0, throughput=3000.0), number=2)
        record(store, trials[3]._trial_id, level(64, ttft_p99=100.0, throughput=5000.0), number=3)
        record(store, trials[0]._trial_id, level(32, ttft_p99=10.0, throughput=9000.0), number=0)
    engine = create_engine(url)
    with engine.connect() as conn:

        def best(limit: float) -> int | None:
            row = conn.execute(
                text(BEST_AT_CONCURRENCY_SQL), {"study": "s", "concurrency": 64, "ttft_p99_ms": limit}
            ).first()
            return None if row is None else row.trial_number

        assert best(500.0) == 1
        assert best(420.0) == 0
        assert best(50.0) is None
    engine.dispose()


def test_plain_alembic_cli_with_x_url_and_env(tmp_path: Path) -> None:
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
    assert current(f"sqlite:///{db}") == "0002"
    out = subprocess.run(
        [*alembic_cli, "current"],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
        env={**env, "NOVA_STORAGE": f"sqlite:///{db}"},
    )
    assert "0002" in out.stdout
    no_url = subprocess.run([*alembic_cli, "current"], cwd=REPO, env=env, capture_output=True, text=True)
    assert no_url.returncode != 0 and "no database URL" in no_url.stderr
