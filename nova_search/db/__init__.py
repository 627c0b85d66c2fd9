"""nova's own tables (``nova_*``) next to Optuna's: models, migrations, the per-level store, SQL.

upgrade(url) / downgrade(url, rev) / current(url)   alembic, nova_alembic_version
LevelStore(url).record(...) / .rows(study)          idempotent per-level rows, retried writes
BEST_AT_CONCURRENCY_SQL                             plain SQL joining Optuna's trials
"""

from nova_search.db.migrate import current, downgrade, upgrade
from nova_search.db.models import Base, LevelResultRow
from nova_search.db.queries import BEST_AT_CONCURRENCY_SQL
from nova_search.db.store import LevelStore

__all__ = [
    "BEST_AT_CONCURRENCY_SQL",
    "Base",
    "LevelResultRow",
    "LevelStore",
    "current",
    "downgrade",
    "upgrade",
]
