"""The CLI against storage it cannot use: one-line errors, the password masked, nothing written."""

from __future__ import annotations

import subprocess
import sys

import optuna
import pytest

from nova_search import study as nova_study
from nova_search.spec import parse_spec
from tests.conftest import REPO
from tests.support.pg import fresh_database
from tests.test_helpers import minimal_spec_dict

pytestmark = pytest.mark.postgres


def nova(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nova_search", *args], cwd=REPO, capture_output=True, text=True, timeout=120
    )


def test_worker_on_unreachable_database_masks_the_password():
    r = nova("worker", "s", "--storage", "postgresql+psycopg://postgres:hunter2@127.0.0.1:1/x")
    assert r.returncode == 1
    assert "hunter2" not in r.stdout + r.stderr
    assert "***" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_worker_on_missing_study_names_the_studies_there():
    with fresh_database() as url:
        nova_study.create(parse_spec(minimal_spec_dict()), url, "present")
        r = nova("worker", "absent", "--storage", url)
        assert r.returncode == 1
        assert "no study named 'absent'" in r.stderr and "present" in r.stderr


def test_create_twice_is_refused_and_leaves_the_first_study_intact():
    with fresh_database() as url:
        nova_study.create(parse_spec(minimal_spec_dict()), url, "once")
        r = nova("create", str(REPO / "studies" / "tiny-cpu.yaml"), "--storage", url, "--study-name", "once")
        assert r.returncode == 1 and "already exists" in r.stderr
        assert optuna.study.get_all_study_names(url) == ["once"]


def test_worker_with_bad_url_is_a_one_line_error():
    r = nova("worker", "s", "--storage", "not a url")
    assert r.returncode == 1
    assert "is not a SQLAlchemy URL" in r.stderr
