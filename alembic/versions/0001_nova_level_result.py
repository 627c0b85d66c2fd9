"""nova_level_result: one row per (Optuna trial, concurrency level).

Revision ID: 0001
Revises:
Create Date: 2026-11-30 06:07:45.940510

Only ``nova_*`` tables belong here; Optuna migrates its own schema. ``trial_id`` is Optuna's
``trials.trial_id`` without a foreign key, so Optuna's tables are never altered.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "nova_level_result",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("trial_id", sa.Integer(), nullable=False),
        sa.Column("study_name", sa.String(length=512), nullable=False),
        sa.Column("trial_number", sa.Integer(), nullable=False),
        sa.Column("concurrency", sa.Integer(), nullable=False),
        sa.Column("requests", sa.Integer(), nullable=True),
        sa.Column("completed", sa.Integer(), nullable=True),
        sa.Column("errors", sa.Integer(), nullable=True),
        sa.Column("error_rate", sa.Float(), nullable=True),
        sa.Column("duration_s", sa.Float(), nullable=True),
        sa.Column("input_tokens", sa.Integer(), nullable=True),
        sa.Column("output_tokens", sa.Integer(), nullable=True),
        sa.Column("output_throughput", sa.Float(), nullable=True),
        sa.Column("total_token_throughput", sa.Float(), nullable=True),
        sa.Column("request_throughput", sa.Float(), nullable=True),
        sa.Column("ttft_mean_ms", sa.Float(), nullable=True),
        sa.Column("ttft_p50_ms", sa.Float(), nullable=True),
        sa.Column("ttft_p90_ms", sa.Float(), nullable=True),
        sa.Column("ttft_p99_ms", sa.Float(), nullable=True),
        sa.Column("tpot_mean_ms", sa.Float(), nullable=True),
        sa.Column("tpot_p50_ms", sa.Float(), nullable=True),
        sa.Column("tpot_p90_ms", sa.Float(), nullable=True),
        sa.Column("tpot_p99_ms", sa.Float(), nullable=True),
        sa.Column("itl_mean_ms", sa.Float(), nullable=True),
        sa.Column("itl_p50_ms", sa.Float(), nullable=True),
        sa.Column("itl_p90_ms", sa.Float(), nullable=True),
        sa.Column("itl_p99_ms", sa.Float(), nullable=True),
        sa.Column("e2e_mean_ms", sa.Float(), nullable=True),
        sa.Column("e2e_p50_ms", sa.Float(), nullable=True),
        sa.Column("e2e_p90_ms", sa.Float(), nullable=True),
        sa.Column("e2e_p99_ms", sa.Float(), nullable=True),
        sa.Column("kv_cache_usage_peak", sa.Float(), nullable=True),
        sa.Column("kv_cache_usage_mean", sa.Float(), nullable=True),
        sa.Column("num_running_mean", sa.Float(), nullable=True),
        sa.Column("num_waiting_mean", sa.Float(), nullable=True),
        sa.Column("num_waiting_max", sa.Float(), nullable=True),
        sa.Column("preemptions", sa.Float(), nullable=True),
        sa.Column("prefix_cache_hit_rate", sa.Float(), nullable=True),
        sa.Column("spec_acceptance_rate", sa.Float(), nullable=True),
        sa.Column("spec_mean_acceptance_length", sa.Float(), nullable=True),
        sa.Column("client_cpu_share", sa.Float(), nullable=True),
        sa.Column("profile", sa.JSON(), nullable=False),
        sa.Column("engine_metrics", sa.JSON(), nullable=False),
        sa.Column("worker_host", sa.String(length=255), nullable=False),
        sa.Column("gpu_ids", sa.String(length=255), nullable=False),
        sa.Column("gpu_name", sa.String(length=255), nullable=True),
        sa.Column("engine_version", sa.String(length=255), nullable=True),
        sa.Column("argv", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_nova_level_result")),
        sa.UniqueConstraint(
            "trial_id", "concurrency", name=op.f("uq_nova_level_result_trial_id_concurrency")
        ),
    )
    op.create_index(
        op.f("ix_nova_level_result_study_name"), "nova_level_result", ["study_name"], unique=False
    )
    op.create_index(op.f("ix_nova_level_result_trial_id"), "nova_level_result", ["trial_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_nova_level_result_trial_id"), table_name="nova_level_result")
    op.drop_index(op.f("ix_nova_level_result_study_name"), table_name="nova_level_result")
    op.drop_table("nova_level_result")
