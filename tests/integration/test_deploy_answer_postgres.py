"""The deploy answer on a real PostgreSQL study (a stock baseline and three tuned trials, run by a real
worker on the stand-in engine): the worker stores it (nova:deploy) when the budget is spent, each trial
its deployable argv (nova:deploy_argv); every place agrees with it (policy, report, study note, status,
export); ``policy --write`` stores it again; and the script in docs/deploy/results.md reads it in a
Python process that cannot import nova_search."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import optuna
import pytest

from nova_search import schema
from nova_search.report.dashboard.notes import study_note_markdown
from nova_search.results.deploy import DEPLOY_SCHEMA_VERSION
from nova_search.results.load import load_results
from nova_search.search import lifecycle as nova_study
from nova_search.testing.pg import fresh_database
from nova_search.testing.specs import fake_spec
from nova_search.testing.standin import standin_server
from nova_search.testing.workers import fake_engines, worker
from tests.support import REPO
from tests.support.cli import nova_ok as ok
from tests.support.contract import check_text
from tests.support.deploy import (
    assert_text_shows,
    note_deploy_section,
    ranges_of,
    report_deploy_section,
    status_tail,
)

pytestmark = pytest.mark.postgres

NAME = "deploy"


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("deploy")
    with fresh_database() as db:
        spec = fake_spec(4, name=NAME, baselines=["stock"])
        nova_study.create(spec, db, NAME)
        proc = worker(db, tmp, name=NAME)
        out = proc.communicate(timeout=240)[0]
        assert proc.returncode == 0, out[-3000:]
        yield db
    assert fake_engines() == []


def stored_answer(url: str) -> dict:
    return optuna.load_study(study_name=NAME, storage=url).user_attrs[schema.DEPLOY.key]


def test_the_worker_stores_the_answer_and_each_trial_its_deployable_argv(url):
    answer = stored_answer(url)
    policy = json.loads(ok("policy", NAME, "--storage", url, "--format", "json"))
    assert answer["schema_version"] == DEPLOY_SCHEMA_VERSION
    assert {k: policy[k] for k in answer} == answer  # the stored answer is policy's
    ((label, trial, argv),) = ranges_of(answer)  # no drafter: tuned at every concurrency
    assert label == "1–∞" and answer["ranges"][0]["evidence"]["status"] == "no_candidate"
    assert answer["vllm_version"] and answer["device"] and answer["nova_version"]
    trials = {str(t.number): t for t in optuna.load_study(study_name=NAME, storage=url).get_trials()}
    for t in trials.values():
        deploy_argv = t.user_attrs[schema.DEPLOY_ARGV.key]
        assert deploy_argv[:3] == ["vllm", "serve", "fake-model"]
        assert not {"--host", "--port", "--config"} & set(deploy_argv)
        assert "--host" in t.user_attrs[schema.ARGV.key]
    assert trials[trial].user_attrs[schema.DEPLOY_ARGV.key] == argv
    assert "secret" not in json.dumps(answer).lower() and "api_key" not in json.dumps(answer).lower()


def test_every_place_gives_the_same_answer(url, tmp_path):
    answer = stored_answer(url)
    out = tmp_path / "report.html"
    ok("report", NAME, "--storage", url, "-o", str(out))
    assert_text_shows(report_deploy_section(out.read_text()), answer, "report")
    assert_text_shows(note_deploy_section(study_note_markdown(load_results(NAME, url))), answer, "note")
    assert_text_shows(status_tail(ok("status", NAME, "--storage", url)), answer, "status")
    assert json.loads(ok("status", NAME, "--storage", url, "--json"))["deploy"] == answer
    table = ok("policy", NAME, "--storage", url)
    assert table.startswith("What to deploy:")
    assert_text_shows(table, answer, "policy")
    ((_, trial, argv),) = ranges_of(answer)
    text = ok("export", NAME, "--storage", url)
    assert f"(trial {trial})" in text and shlex.split(text.splitlines()[-1]) == argv


def test_the_worker_written_study_note_names_the_device(url):
    """The study note the worker wrote (the dashboard's) says where the answer was measured, as the
    answer, policy and status do: never "an unrecorded device"."""
    from optuna_dashboard import get_note

    answer = stored_answer(url)
    note = get_note(optuna.load_study(study_name=NAME, storage=url))
    assert answer["device"] and f"on {answer['device']}," in note, note[:1500]
    assert "an unrecorded device" not in note


def test_policy_write_stores_it_again(url):
    study = optuna.load_study(study_name=NAME, storage=url)
    before = study.user_attrs[schema.DEPLOY.key]
    study.set_user_attr(schema.DEPLOY.key, None)
    ok("policy", NAME, "--storage", url, "--write")
    assert stored_answer(url) == before


def _docs_script() -> str:
    text = (REPO / "docs" / "deploy" / "results.md").read_text()
    (script,) = [b for b in re.findall(r"```python\n(.*?)```", text, flags=re.S) if "nova:deploy" in b]
    return script


def test_the_documented_script_reads_it_with_optuna_alone(url, tmp_path):
    script = tmp_path / "read_deploy.py"
    script.write_text(_docs_script())
    # optuna's own installation, without site processing: no .pth, so no editable nova_search
    site = str(Path(optuna.__file__).parents[1])
    boot = (
        "import sys, importlib.util, runpy; "
        f"sys.path.append({site!r}); "
        "assert importlib.util.find_spec('nova_search') is None, 'nova_search is importable'; "
        f"sys.argv = [{str(script)!r}, {url!r}, {NAME!r}]; "
        f"runpy.run_path({str(script)!r}, run_name='__main__')"
    )
    r = subprocess.run(
        [sys.executable, "-I", "-S", "-c", boot], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr[-3000:]
    answer = stored_answer(url)
    ((label, trial, argv),) = ranges_of(answer)
    lines = r.stdout.splitlines()
    assert lines[0] == f"1-inf: trial {trial} (no_candidate)" and label == "1–∞"
    assert lines[1] == "  " + shlex.join(argv)
    assert lines[2] == f"vLLM {answer['vllm_version']} on {answer['device']}"


def test_every_json_output_of_the_study_validates_with_format_checks(url, tmp_path):
    """The JSON contract as automation checks it (issue 53): every JSON output of this real study (a
    worker ran it on the stand-in engine), and ``bench`` against a stand-in server, through
    ``check-jsonschema`` with its format checks (a timestamp is an RFC 3339 date-time)."""
    outputs = {
        "dump": ok("dump", NAME, "--storage", url),
        "best": ok("best", NAME, "--storage", url, "--format", "json"),
        "status": ok("status", NAME, "--storage", url, "--format", "json"),
        "policy": ok("policy", NAME, "--storage", url, "--format", "json"),
        "deploy": json.dumps(stored_answer(url)),
    }
    with standin_server() as srv:
        outputs["bench"] = ok(
            "bench", "--url", srv.base_url, "--concurrency", "1,2", "--num-requests", "4", "--warmup", "1",
            "--input-len", "8", "--output-len", "4", "--vocab-size", "1000", "--format", "json",
        )  # fmt: skip
    docs = {name: check_text(name, text, tmp_path, name) for name, text in outputs.items()}
    assert docs["dump"]["trials"] and all(t["datetime_start"].endswith("Z") for t in docs["dump"]["trials"])
    assert docs["status"]["workers"] and docs["status"]["workers"][0]["last_seen"].endswith("Z")
    assert {d["schema_version"] for d in docs.values()} == {1, 3}
