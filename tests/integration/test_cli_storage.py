"""The CLI against storage it cannot use: one-line errors, the password masked, nothing written."""

from __future__ import annotations

import optuna
import pytest

from nova_search.errors import ExitCode
from nova_search.search import lifecycle as nova_study
from nova_search.spec import parse_spec
from nova_search.testing.pg import fresh_database
from nova_search.testing.specs import minimal_spec_dict
from tests.support import REPO
from tests.support.cli import nova

pytestmark = pytest.mark.postgres


def test_worker_on_unreachable_database_waits_then_says_so_masking_the_password():
    url = "postgresql+psycopg://postgres:hunter2@127.0.0.1:1/x"
    r = nova("worker", "s", "--storage", url, env={"NOVA_STORAGE_RETRY_S": "2"})
    assert r.returncode == ExitCode.STORAGE
    assert "hunter2" not in r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 2 and "Traceback" not in r.stderr, r.stderr  # one warning, one error
    assert "retrying for up to 2 s (NOVA_STORAGE_RETRY_S)" in lines[0]
    masked = "postgresql+psycopg://postgres:***@127.0.0.1:1/x"
    assert lines[1].startswith(f"error: cannot open storage {masked} after")
    assert "attempts over 2 s: OperationalError (is the server up, the URL right?)" in lines[1]


def test_worker_on_missing_study_names_the_studies_there():
    with fresh_database() as url:
        nova_study.create(parse_spec(minimal_spec_dict()), url, "present")
        r = nova("worker", "absent", "--storage", url)
        assert r.returncode == ExitCode.BAD_INPUT
        assert "no study named 'absent'" in r.stderr and "present" in r.stderr


def test_create_twice_is_refused_and_leaves_the_first_study_intact():
    with fresh_database() as url:
        nova_study.create(parse_spec(minimal_spec_dict()), url, "once")
        r = nova("create", str(REPO / "studies" / "tiny-cpu.yaml"), "--storage", url, "--study-name", "once")
        assert r.returncode == ExitCode.BAD_INPUT and "already exists" in r.stderr
        assert optuna.study.get_all_study_names(url) == ["once"]


def test_worker_with_bad_url_is_a_one_line_error():
    r = nova("worker", "s", "--storage", "not a url")
    assert r.returncode == ExitCode.STORAGE
    assert "is not a SQLAlchemy URL" in r.stderr


def test_a_worker_without_an_engine_says_so_before_it_asks_a_trial():
    with fresh_database() as url:
        raw = minimal_spec_dict()
        raw["engine"] = {"device": "cpu"}  # neither engine.python nor engine.command
        nova_study.create(parse_spec(raw), url, "no-engine")
        r = nova("worker", "no-engine", "--storage", url, env={"NOVA_ENGINE_PYTHON": ""})
        assert r.returncode != 0 and "engine.python is not set" in r.stderr
        trials = optuna.load_study(study_name="no-engine", storage=url).get_trials()
        waiting = optuna.trial.TrialState.WAITING
        assert trials and all(t.state == waiting for t in trials)  # the stock baseline still queued: none ran


@pytest.fixture
def read_only_folder(tmp_path):
    """A folder nova cannot write: a read-only bind mount when running as root (root writes past file
    modes), its mode 0500 otherwise. Skipped only where neither can be made (root without mount)."""
    import os
    import subprocess

    folder = tmp_path / "ro"
    folder.mkdir()
    if os.geteuid() != 0:
        folder.chmod(0o500)
        yield folder
        folder.chmod(0o700)
        return
    mounted = (
        subprocess.run(["mount", "--bind", str(folder), str(folder)], capture_output=True).returncode == 0
    )
    if mounted:
        mounted = (
            subprocess.run(["mount", "-o", "remount,bind,ro", str(folder)], capture_output=True).returncode
            == 0
        )
    if not mounted:
        subprocess.run(["umount", str(folder)], capture_output=True)
        pytest.skip("running as root without the right to mount: no folder root cannot write")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


@pytest.mark.parametrize("command", ["create", "run", "db"])
def test_a_read_only_sqlite_folder_is_named_without_a_traceback(read_only_folder, command):
    url = f"sqlite:///{read_only_folder / 'nova.db'}"
    spec = str(REPO / "studies" / "tiny-cpu.yaml")
    argv = {"create": ["create", spec], "run": ["run", spec], "db": ["db", "upgrade"]}[command]
    r = nova(*argv, "--storage", url, timeout=30)
    assert r.returncode == ExitCode.STORAGE, r.stderr
    assert "Traceback" not in r.stderr and "OSError" not in r.stderr, r.stderr
    assert f"cannot write the folder {read_only_folder}" in r.stderr, r.stderr
    assert "read-only file system" in r.stderr or "no permission" in r.stderr, r.stderr
    assert list(read_only_folder.iterdir()) == []


def test_run_on_a_study_that_exists_runs_and_prints_its_stored_budget(tmp_path):
    """Issue 40: `run --n-trials 5` on a study stored with a budget of 2 printed "budget 5" and ran 2.
    The stored budget is the one every worker counts against: it is printed and run, a spec file with
    another budget gets a note, and an explicit --n-trials that differs is refused before anything runs."""
    import yaml

    with fresh_database() as url:
        nova_study.create(parse_spec(minimal_spec_dict(budget={"n_trials": 2})), url, "kept")
        spec = tmp_path / "spec.yaml"
        spec.write_text(yaml.safe_dump(minimal_spec_dict(name="kept", budget={"n_trials": 6})))

        refused = nova("run", str(spec), "--storage", url, "--n-trials", "5")
        assert refused.returncode == ExitCode.BAD_INPUT, refused.stderr
        assert "--n-trials 5: study 'kept' exists with a budget of 2 trials" in refused.stderr
        assert optuna.load_study(study_name="kept", storage=url).get_trials()[0].state.name == "WAITING"

        r = nova("run", str(spec), "--storage", url, "--artifacts-dir", str(tmp_path / "art"), timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        assert "budget 2 trials" in r.stdout and "budget 6" not in r.stdout, r.stdout
        assert "note: study kept exists: its stored budget (2 trials) is kept" in r.stderr, r.stderr
        trials = optuna.load_study(study_name="kept", storage=url).get_trials()
        assert len(trials) == 2 and all(t.state.name == "COMPLETE" for t in trials)
