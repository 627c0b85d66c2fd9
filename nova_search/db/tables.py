"""SQLAlchemy 2.0 models of nova's own tables (prefixed ``nova_``), on a MetaData of their own.

Optuna owns its tables (``studies``, ``trials``, ...) and its ``alembic_version``; nothing here
references them by foreign key, so Optuna's schema and migrations stay untouched. The columns are
written out (not generated at import time) so alembic autogenerate sees exactly what the migrations
create; ``tests/integration/test_db.py`` checks they still cover every name in ``METRIC_NAMES``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, DateTime, Float, Integer, MetaData, String, UniqueConstraint, func
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from nova_search.measure.metrics import METRIC_NAMES

#: every nova table starts with this; alembic's include_object keeps autogenerate inside it
TABLE_PREFIX = "nova_"

#: deterministic constraint and index names, the same on every backend and in the migrations
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    """Declarative base of nova's tables; its MetaData is never Optuna's."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class LevelResultRow(Base):
    """One concurrency level of one Optuna trial: the LevelResult, flattened, plus where it ran.

    ``trial_id`` is Optuna's ``trials.trial_id`` (no FK: Optuna's schema is not ours to alter).
    Metric columns carry the names of ``nova_search.measure.metrics.METRIC_NAMES``; the counts are
    integers, everything else a float; all are nullable (None = undefined for that level).
    """

    __tablename__ = "nova_level_result"
    __table_args__ = (UniqueConstraint("trial_id", "concurrency"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    trial_id: Mapped[int] = mapped_column(Integer, index=True)
    study_name: Mapped[str] = mapped_column(String(512), index=True)
    trial_number: Mapped[int] = mapped_column(Integer)
    concurrency: Mapped[int] = mapped_column(Integer)

    # --- the METRIC_NAMES columns, in METRIC_NAMES order ---
    requests: Mapped[int | None] = mapped_column(Integer)
    completed: Mapped[int | None] = mapped_column(Integer)
    errors: Mapped[int | None] = mapped_column(Integer)
    error_rate: Mapped[float | None] = mapped_column(Float)
    duration_s: Mapped[float | None] = mapped_column(Float)
    input_tokens: Mapped[int | None] = mapped_column(Integer)
    output_tokens: Mapped[int | None] = mapped_column(Integer)
    output_throughput: Mapped[float | None] = mapped_column(Float)
    total_token_throughput: Mapped[float | None] = mapped_column(Float)
    request_throughput: Mapped[float | None] = mapped_column(Float)
    goodput: Mapped[float | None] = mapped_column(Float)
    goodput_rate: Mapped[float | None] = mapped_column(Float)
    ttft_mean_ms: Mapped[float | None] = mapped_column(Float)
    ttft_p50_ms: Mapped[float | None] = mapped_column(Float)
    ttft_p90_ms: Mapped[float | None] = mapped_column(Float)
    ttft_p95_ms: Mapped[float | None] = mapped_column(Float)
    ttft_p99_ms: Mapped[float | None] = mapped_column(Float)
    ttft_p999_ms: Mapped[float | None] = mapped_column(Float)
    ttft_std_ms: Mapped[float | None] = mapped_column(Float)
    ttft_min_ms: Mapped[float | None] = mapped_column(Float)
    ttft_max_ms: Mapped[float | None] = mapped_column(Float)
    tpot_mean_ms: Mapped[float | None] = mapped_column(Float)
    tpot_p50_ms: Mapped[float | None] = mapped_column(Float)
    tpot_p90_ms: Mapped[float | None] = mapped_column(Float)
    tpot_p95_ms: Mapped[float | None] = mapped_column(Float)
    tpot_p99_ms: Mapped[float | None] = mapped_column(Float)
    tpot_p999_ms: Mapped[float | None] = mapped_column(Float)
    tpot_std_ms: Mapped[float | None] = mapped_column(Float)
    tpot_min_ms: Mapped[float | None] = mapped_column(Float)
    tpot_max_ms: Mapped[float | None] = mapped_column(Float)
    itl_mean_ms: Mapped[float | None] = mapped_column(Float)
    itl_p50_ms: Mapped[float | None] = mapped_column(Float)
    itl_p90_ms: Mapped[float | None] = mapped_column(Float)
    itl_p95_ms: Mapped[float | None] = mapped_column(Float)
    itl_p99_ms: Mapped[float | None] = mapped_column(Float)
    itl_p999_ms: Mapped[float | None] = mapped_column(Float)
    itl_std_ms: Mapped[float | None] = mapped_column(Float)
    itl_min_ms: Mapped[float | None] = mapped_column(Float)
    itl_max_ms: Mapped[float | None] = mapped_column(Float)
    e2e_mean_ms: Mapped[float | None] = mapped_column(Float)
    e2e_p50_ms: Mapped[float | None] = mapped_column(Float)
    e2e_p90_ms: Mapped[float | None] = mapped_column(Float)
    e2e_p95_ms: Mapped[float | None] = mapped_column(Float)
    e2e_p99_ms: Mapped[float | None] = mapped_column(Float)
    e2e_p999_ms: Mapped[float | None] = mapped_column(Float)
    e2e_std_ms: Mapped[float | None] = mapped_column(Float)
    e2e_min_ms: Mapped[float | None] = mapped_column(Float)
    e2e_max_ms: Mapped[float | None] = mapped_column(Float)
    kv_cache_usage_peak: Mapped[float | None] = mapped_column(Float)
    kv_cache_usage_mean: Mapped[float | None] = mapped_column(Float)
    num_running_mean: Mapped[float | None] = mapped_column(Float)
    num_waiting_mean: Mapped[float | None] = mapped_column(Float)
    num_waiting_max: Mapped[float | None] = mapped_column(Float)
    preemptions: Mapped[float | None] = mapped_column(Float)
    prefix_cache_hit_rate: Mapped[float | None] = mapped_column(Float)
    spec_acceptance_rate: Mapped[float | None] = mapped_column(Float)
    spec_mean_acceptance_length: Mapped[float | None] = mapped_column(Float)
    client_cpu_share: Mapped[float | None] = mapped_column(Float)

    profile: Mapped[dict[str, Any]] = mapped_column(JSON)
    engine_metrics: Mapped[dict[str, Any]] = mapped_column(JSON)
    worker_host: Mapped[str] = mapped_column(String(255))
    gpu_ids: Mapped[str] = mapped_column(String(255))
    gpu_name: Mapped[str | None] = mapped_column(String(255))
    engine_version: Mapped[str | None] = mapped_column(String(255))
    argv: Mapped[list[str]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


#: the metric columns of LevelResultRow, checked against METRIC_NAMES by the tests
METRIC_COLUMNS: tuple[str, ...] = tuple(
    c.name for c in LevelResultRow.__table__.columns if c.name in METRIC_NAMES
)
