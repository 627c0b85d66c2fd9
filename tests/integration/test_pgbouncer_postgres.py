"""The fleet simulation through PgBouncer in transaction mode (Debian's package, as
docs/deploy/cluster.md has a team run it): 8 real worker loops in 4 processes, one process killed
mid-trial, every worker connected to PgBouncer, PgBouncer holding at most 20 server connections.
The budget lock is transaction-level, so it passes through; psycopg prepares no statement on the
server (a server connection serves many clients). The budget is met exactly, nothing is measured
twice or lost, no worker hangs, and the server sees PgBouncer's connections, not the workers'."""

from __future__ import annotations

import pytest

from nova_search.testing.pg_server import pgbouncer_binary
from tests.support.fleet import run_small_fleet

pytestmark = [pytest.mark.postgres, pytest.mark.faults]  # a server and a PgBouncer of its own: --all


def test_eight_workers_through_pgbouncer_in_transaction_mode():
    if pgbouncer_binary() is None:  # scripts/test.sh --all installs it where it can (as root: CI)
        pytest.skip(
            "PgBouncer is not installed: apt-get install pgbouncer (scripts/test.sh --all does, as root)"
        )
    result = run_small_fleet(
        "--no-notes", "--max-connections", "30", "--pgbouncer", "20", "--timeout-s", "120"
    )
    # PgBouncer's 20 server connections, plus the harness's own reader on the server directly
    assert result["peak_connections"] <= 22, result
