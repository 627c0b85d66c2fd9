"""nova_level_result: p95, standard deviation, min and max of TTFT, TPOT, ITL and E2E.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30 15:00:00.000000

Nullable float columns; rows written before this revision keep NULL (their levels were measured
without them). The downgrade drops exactly these columns.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "nova_level_result"
COLUMNS = tuple(
    f"{latency}_{stat}_ms"
    for latency in ("ttft", "tpot", "itl", "e2e")
    for stat in ("p95", "std", "min", "max")
)


def upgrade() -> None:
    for name in COLUMNS:
        op.add_column(TABLE, sa.Column(name, sa.Float(), nullable=True))


def downgrade() -> None:
    for name in reversed(COLUMNS):
        op.drop_column(TABLE, name)
