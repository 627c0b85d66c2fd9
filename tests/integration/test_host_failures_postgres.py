"""A host problem is not the configuration's (issue 40, finding 8, "full disk"): on a real PostgreSQL
with the stand-in engine, a worker whose artifacts folder is on a full filesystem (a real one: a 1 MiB
tmpfs, filled, mounted in a private mount namespace by ``unshare``) does not spend the budget on FAIL
trials blamed on the configuration. The trial it had asked ends FAIL with reason ``host``, is queued
again (so it does not count), and the worker stops with a message that names the problem."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from nova_search import schema
from nova_search.db import count_toward_budget
from nova_search.search import lifecycle as nova_study
from nova_search.testing.fault_table import note
from nova_search.testing.pg import fresh_database
from nova_search.testing.specs import fake_spec
from nova_search.testing.workers import fake_engines
from tests.support import REPO

pytestmark = [pytest.mark.postgres, pytest.mark.faults]  # fault injection at full size: --all


def _worker_on_a_full_disk(url: str, disk: Path) -> subprocess.CompletedProcess[str]:
    """``nova-search worker`` with its artifacts on a 1 MiB tmpfs filled to the last block, in a mount
    namespace of its own (``unshare -rm``: root in it, whoever runs the test)."""
    disk.mkdir()
    worker = shlex.join(
        [sys.executable, "-m", "nova_search", "worker", "dist", "--storage", url, "--artifacts-dir",
         str(disk / "artifacts")]
    )  # fmt: skip
    script = (
        f"mount -t tmpfs -o size=1m tmpfs {shlex.quote(str(disk))} && "
        f"mkdir {shlex.quote(str(disk / 'artifacts'))} && "
        f"(dd if=/dev/zero of={shlex.quote(str(disk / 'fill'))} bs=4k 2>/dev/null; true) && "
        f"exec {worker}"
    )
    return subprocess.run(
        ["unshare", "-rm", "sh", "-c", script],
        cwd=REPO,
        env=os.environ,
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_a_full_artifacts_disk_stops_the_worker_without_spending_the_budget(tmp_path: Path):
    budget = 3
    with fresh_database() as url:
        nova_study.create(fake_spec(budget), url, "dist")
        done = _worker_on_a_full_disk(url, tmp_path / "disk")
        out = done.stdout + done.stderr
        assert done.returncode == 1, out[-3000:]
        assert "No space left on device" in out and "host" in out, out[-3000:]
        assert "Traceback" not in out, out[-3000:]
        trials = optuna.load_study(study_name="dist", storage=url).get_trials()
        failed = [t for t in trials if t.state == TrialState.FAIL]
        queued = sum(t.state == TrialState.WAITING for t in trials)
        # lost: a host failure that spent the budget or was not queued again
        note(
            "host failures", "a full artifacts disk", lost=count_toward_budget(trials) + len(failed) - queued
        )
        assert len(failed) == 1, [(t.number, t.state, t.user_attrs.get("nova:summary")) for t in trials]
        assert schema.REASON.read(failed[0].user_attrs) == "host"
        assert count_toward_budget(trials) == 0  # nothing spent: the host failure is queued again
        (retry,) = [t for t in trials if t.state == TrialState.WAITING]
        assert retry.system_attrs[schema.RETRY_OF] == failed[0].number
    assert fake_engines() == []
