"""nova_level_result: goodput, goodput_rate and the p99.9 latencies.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01 09:00:00.000000

Nullable float columns added at the end of the table; rows written before this revision keep NULL
(their levels were measured without them). The downgrade drops exactly these columns.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "nova_level_result"
COLUMNS = (
    "goodput",
    "goodput_rate",
    "ttft_p999_ms",
    "tpot_p999_ms",
    "itl_p999_ms",
    "e2e_p999_ms",
)


def upgrade() -> None:
    for name in COLUMNS:
        op.add_column(TABLE, sa.Column(name, sa.Float(), nullable=True))


def downgrade() -> None:
    for name in reversed(COLUMNS):
        op.drop_column(TABLE, name)
