"""Inspect and consume the results of a real study on PostgreSQL: one stock baseline and three tuned
trials run by a real worker with the fast stand-in engine (nova_search/testing/fake_engine.py), then
``best`` / ``export`` / ``status`` / ``report`` through the CLI and ``nova_search.api`` from a separate
process, checked against what Optuna's storage holds."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import textwrap

import optuna
import psycopg
import pytest
import yaml
from optuna.trial import TrialState

from nova_search import schema
from nova_search.db import LevelStore
from nova_search.engine.command import deployable_argv
from nova_search.errors import ExitCode
from nova_search.results.serialize import BEST_SCHEMA_VERSION
from nova_search.search import lifecycle as nova_study
from nova_search.testing.pg import fresh_database
from nova_search.testing.specs import fake_spec
from nova_search.testing.workers import fake_engines, worker
from tests.support import REPO
from tests.support.cli import nova as cli
from tests.support.cli import nova_ok as ok

pytestmark = pytest.mark.postgres

NAME = "api"
CONSTRAINT = "ttft_p99_ms <= 60000 at concurrency 4"


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("api")
    with fresh_database() as db:
        spec = fake_spec(4, name=NAME, baselines=["stock"], constraints=[CONSTRAINT])
        nova_study.create(spec, db, NAME)
        proc = worker(db, tmp, name=NAME)
        out = proc.communicate(timeout=240)[0]
        assert proc.returncode == 0, out[-3000:]
        yield db
    assert fake_engines() == []


@pytest.fixture(scope="module")
def stored(url):
    """What Optuna itself says, read in this process."""
    study = optuna.load_study(study_name=NAME, storage=url)
    trials = study.get_trials()
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 4, [
        (t.state, t.user_attrs.get(schema.MESSAGE.key)) for t in trials
    ]
    return study, trials


def top_by_throughput(trials):
    return max(trials, key=lambda t: (t.values[0], -t.number))


def test_the_study_ran_a_stock_baseline_and_three_tuned_trials(stored):
    _, trials = stored
    assert [t.user_attrs.get(schema.ROLE.key) for t in trials] == ["stock", None, None, None]
    assert all(t.constraints and all(v <= 0 for v in t.constraints.values()) for t in trials)


def test_best_json_is_the_pareto_front_with_stored_values(url, stored):
    study, trials = stored
    doc = json.loads(ok("best", NAME, "--storage", url, "--format", "json"))
    assert doc["schema_version"] == BEST_SCHEMA_VERSION and doc["study"] == NAME
    assert doc["objective"] is None and doc["where"] == []  # the Pareto front, unfiltered
    got = doc["trials"]
    front = {t.number: t for t in study.best_trials}
    assert sorted(d["number"] for d in got) == sorted(front)
    assert [d["values"]["output_throughput@best"] for d in got] == sorted(
        (t.values[0] for t in front.values()), reverse=True
    )
    for d in got:
        t = front[d["number"]]
        assert d["values"] == dict(zip(study.metric_names, t.values, strict=True))
        assert d["params"] == t.params
        assert d["argv"] == t.user_attrs[schema.ARGV.key]
        # the deployable command as the worker stored it: vllm serve, not the worker's interpreter
        assert d["deployable_argv"] == t.user_attrs[schema.DEPLOY_ARGV.key]
        assert d["deployable_argv"][:2] == ["vllm", "serve"]
        assert "--port" in d["argv"] and "--port" not in d["deployable_argv"]
        assert d["engine_version"] == t.user_attrs[schema.ENGINE_VERSION.key]
        assert d["feasible"] is True
    as_yaml = yaml.safe_load(ok("best", NAME, "--storage", url, "--format", "yaml"))
    assert as_yaml == doc


def test_best_by_objective_and_where(url, stored):
    _, trials = stored
    top = top_by_throughput(trials)
    line = ok("best", NAME, "--storage", url, "--objective", "output_throughput@best", "--format", "argv")
    assert shlex.split(line) == top.user_attrs[schema.DEPLOY_ARGV.key]  # the stored vllm serve round-trips

    fastest = min(trials, key=lambda t: (t.values[1], t.number))
    bound = fastest.values[1]
    got = json.loads(
        ok(
            "best",
            NAME,
            "--storage",
            url,
            "--objective",
            "output_throughput@best",
            "--where",
            f"ttft_p99_ms<={bound!r}@4",
        )
    )
    assert got["objective"] == "output_throughput@best" and got["where"] == [f"ttft_p99_ms<={bound!r}@4"]
    assert [d["number"] for d in got["trials"]] == [fastest.number]  # the only one with TTFT p99@4 that low

    # a metric@level that is not an objective: computed from the stored levels
    (c1,) = json.loads(ok("best", NAME, "--storage", url, "--objective", "output_throughput@1"))["trials"]
    want = max(
        trials,
        key=lambda t: (
            next(lv for lv in t.user_attrs[schema.LEVELS.key] if lv["concurrency"] == 1)["output_throughput"],
            -t.number,
        ),
    )
    assert c1["number"] == want.number

    none = cli("best", NAME, "--storage", url, "--where", "ttft_p99_ms<=0.0001@4")
    assert none.returncode == ExitCode.NOTHING_QUALIFIES and none.stdout == ""
    assert none.stderr.strip().count("\n") == 0 and "no feasible COMPLETE trial" in none.stderr
    unmeasured = cli("best", NAME, "--storage", url, "--where", "ttft_p99_ms<=1e9@32")
    assert unmeasured.returncode == ExitCode.NOTHING_QUALIFIES  # level 32 never measured: condition false


def test_bad_flags_exit_2_naming_the_flag_and_valid_values(url):
    r = cli("best", NAME, "--storage", url, "--format", "xml")
    assert r.returncode == 2 and "--format 'xml'" in r.stderr and "json, argv, yaml" in r.stderr
    r = cli("best", NAME, "--storage", url, "--where", "ttft_p99_ms=5@4")
    assert r.returncode == 2 and "--where" in r.stderr and "<=, >=, <, >" in r.stderr
    r = cli("best", NAME, "--storage", url, "--where", "speed<=5@4")
    assert r.returncode == 2 and "unknown metric 'speed'" in r.stderr and "ttft_p99_ms" in r.stderr
    r = cli("best", NAME, "--storage", url, "--objective", "speed@best")
    assert r.returncode == 2 and "--objective" in r.stderr
    r = cli("export", NAME, "--storage", url, "--format", "helm")
    assert r.returncode == 2 and "vllm, compose, k8s" in r.stderr


def test_export_gives_what_the_policy_recommends_in_every_format(url, stored):
    _, trials = stored
    top = top_by_throughput(trials)  # no drafter: the policy is the tuned baseline everywhere
    deploy = deployable_argv(top.user_attrs[schema.ARGV.key])
    flags = deploy[deploy.index("fake-model") + 1 :]
    text = ok("export", NAME, "--storage", url)  # default: vllm, the policy's configuration
    assert (
        f"the deployment policy of {NAME}: the tuned configuration at every concurrency (trial {top.number})"
        in text
    )
    assert shlex.split(text.splitlines()[-1]) == ["vllm", "serve", "fake-model", *flags]
    policy = json.loads(ok("policy", NAME, "--storage", url, "--format", "json"))
    assert policy["tuned"] == str(top.number) and [r["trial"] for r in policy["policy"]] == [str(top.number)]

    stock = trials[0]
    stock_flags = deployable_argv(stock.user_attrs[schema.ARGV.key])
    container_args = ["--model", "fake-model", *stock_flags[stock_flags.index("fake-model") + 1 :]]
    compose = yaml.safe_load(ok("export", NAME, "--storage", url, "--trial", "0", "--format", "compose"))
    svc = compose["services"]["vllm"]
    # the study measured on the CPU (the stand-in's spec): vLLM's CPU image, no GPU reservation
    assert svc["image"].startswith("public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo:")
    assert svc["command"] == ["--host", "0.0.0.0", "--port", "8000", *container_args]
    assert "deploy" not in svc

    k8s_text = ok("export", NAME, "--storage", url, "--format", "k8s")
    claim, service, deployment = yaml.safe_load_all(k8s_text)
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["args"] == ["--host", "0.0.0.0", "--port", "8000", "--model", "fake-model", *flags]
    assert "nvidia.com/gpu" not in container["resources"]["limits"] and service["kind"] == "Service"
    assert claim["kind"] == "PersistentVolumeClaim"
    r = cli("export", NAME, "--storage", url, "--format", "k8s", "--device", "cuda")
    assert r.returncode == 2 and "was measured on cpu" in r.stderr  # never silently onto a GPU
    assert f"(trial {top.number})" in k8s_text

    r = cli("export", NAME, "--storage", url, "--trial", "99")
    assert r.returncode == 2 and "--trial: study 'api' has no trial 99" in r.stderr


def test_status(url, stored):
    study, trials = stored
    text = ok("status", NAME, "--storage", url)
    assert f"study {NAME}" in text and "budget 4, used 4" in text
    assert "COMPLETE 4, RUNNING 0, WAITING 0, PRUNED 0, FAIL 0" in text
    top = top_by_throughput(trials)
    assert f"output_throughput@best (max): {top.values[0]:.4g} (trial {top.number})" in text
    assert "ETA: 0s (done" in text
    st = json.loads(ok("status", NAME, "--storage", url, "--json"))
    assert st["counts"]["COMPLETE"] == 4 and st["remaining"] == 0 and st["eta_s"] == 0.0
    host = trials[0].user_attrs[schema.WORKER.key]["host"]
    assert [w["host"] for w in st["workers"]] == [host]  # seen recently: it just finished 4 trials
    assert st["workers"][0]["trials_finished"] == 4 and st["active_slots"] == 0
    durations = [(t.datetime_complete - t.datetime_start).total_seconds() for t in trials]
    assert st["mean_trial_s"] == pytest.approx(sum(durations) / 4)
    best = {b["objective"]: b for b in st["best"]}
    assert best["ttft_p99_ms@4"]["value"] == min(t.values[1] for t in trials)


def test_report_html(url, stored, tmp_path):
    _, trials = stored
    out = tmp_path / "report.html"
    msg = ok("report", NAME, "--storage", url, "-o", str(out), "--gpu-hour-usd", "2.5")
    assert "report written to" in msg
    page = out.read_text()
    for cls in ("summary", "throughput", "latency", "cost", "pareto", "hypervolume", "importances", "trials"):
        assert f'<table class="{cls}">' in page, cls
    assert page.count('class="plotly-graph-div"') >= 5
    stock = trials[0]
    stock_c4 = next(lv for lv in stock.user_attrs[schema.LEVELS.key] if lv["concurrency"] == 4)
    assert f"<td>{stock_c4['output_throughput']:.4g}</td>" in page  # the stock tok/s from storage
    cost = 2.5 / (stock_c4["output_throughput"] * 3600) * 1e6
    assert f"<td>{cost:.4g}</td>" in page
    assert "max_num_seqs" in page  # importances (3 tuned trials with params)
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]

    bad = cli("report", NAME, "--storage", url, "-o", str(out), "--gpu-hour-usd", "0")
    assert bad.returncode == 2 and "--gpu-hour-usd" in bad.stderr


API_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from nova_search import api
    url = sys.argv[1]
    r = api.load_results("api", url)
    top = api.best_trials(r, objective="output_throughput@best")[0]
    front = api.best_trials(r)
    print(json.dumps({
        "objectives": [[o.name, o.direction] for o in r.objectives],
        "budget": r.budget, "budget_used": r.budget_used, "pareto": [int(k) for k in r.front_keys],
        "trials": [
            {"number": t.number, "state": t.state, "role": t.role, "values": t.values,
             "feasible": t.feasible, "params": t.params, "constraints": t.constraints,
             "levels": [lv.as_dict() for lv in t.levels], "argv": t.argv,
             "deployable": t.deployable_argv, "version": t.engine_version, "timing": t.timing,
             "config": t.config.as_dict()}
            for t in r.trials
        ],
        "top": top.number, "front": [t.number for t in front],
        "export": api.export_launch(top, "vllm"), "tuned": api.tuned_baseline(r).number,
        "answer": api.deploy_answer(r).as_json(),
    }))
    """
)


def test_api_from_a_separate_process(url, stored):
    study, trials = stored
    r = subprocess.run(
        [sys.executable, "-c", API_SCRIPT, url], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout)
    assert got["objectives"] == [["output_throughput@best", "maximize"], ["ttft_p99_ms@4", "minimize"]]
    assert got["budget"] == 4 and got["budget_used"] == 4
    assert got["pareto"] == sorted(t.number for t in study.best_trials)
    assert got["top"] == top_by_throughput(trials).number
    assert sorted(got["front"]) == got["pareto"]
    with LevelStore(url) as store:
        rows = store.rows(NAME)
    for d, t in zip(got["trials"], trials, strict=True):
        assert d["number"] == t.number and d["state"] == "COMPLETE" and d["feasible"]
        assert d["role"] == ("stock" if t.number == 0 else "search")
        assert d["values"] == t.values
        assert d["params"] == t.params
        assert d["constraints"] == t.constraints
        assert d["levels"] == t.user_attrs[schema.LEVELS.key]
        assert [lv["concurrency"] for lv in d["levels"]] == [1, 4]
        # the same measurements as nova's table
        mine = [row for row in rows if row["trial_number"] == t.number]
        assert [row["output_throughput"] for row in mine] == [lv["output_throughput"] for lv in d["levels"]]
        assert d["argv"] == t.user_attrs[schema.ARGV.key]
        assert d["deployable"] == deployable_argv(t.user_attrs[schema.ARGV.key])
        assert d["version"] == t.user_attrs[schema.ENGINE_VERSION.key]
        assert d["timing"] == t.user_attrs[schema.TIMING.key]
        assert d["config"] == t.user_attrs[schema.CONFIG.key]
    deployable = got["trials"][got["top"]]["deployable"]
    assert shlex.split(got["export"].splitlines()[-1])[3:] == deployable[deployable.index("fake-model") + 1 :]
    assert got["tuned"] == got["top"]  # no drafter: the best by the first objective is the tuned baseline
    # the deploy answer from Python is policy's (and the stored nova:deploy's)
    policy = json.loads(ok("policy", NAME, "--storage", url, "--format", "json"))
    assert got["answer"] == {k: policy[k] for k in got["answer"]}
    assert got["answer"]["ranges"][0]["configuration"]["trial"] == str(got["tuned"])


def test_storage_errors_are_one_masked_line(url):
    secret = url.replace("postgres@", "postgres:hunter2@", 1)
    assert "hunter2" in secret
    r = cli("status", "nope", "--storage", secret)
    assert r.returncode == ExitCode.BAD_INPUT  # an unknown study is bad input, not a storage failure
    assert "no study named 'nope'" in r.stderr and f"(studies there: {NAME})" in r.stderr
    assert "hunter2" not in r.stderr + r.stdout and "***" in r.stderr
    assert r.stderr.strip().count("\n") == 0
    down = secret.replace(":5432/", ":1/")
    r = cli("best", NAME, "--storage", down)
    assert r.returncode == ExitCode.STORAGE and "hunter2" not in r.stderr and "OperationalError" in r.stderr
    assert "Traceback" not in r.stderr


def test_reading_an_empty_database_creates_nothing():
    with fresh_database() as empty:
        r = cli("status", NAME, "--storage", empty)
        assert r.returncode == ExitCode.STORAGE and "no Optuna study tables there" in r.stderr
        libpq = empty.replace("postgresql+psycopg://", "postgresql://", 1)
        with psycopg.connect(libpq) as conn:
            (n,) = conn.execute(
                "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
            ).fetchone()
        assert n == 0  # a read never creates Optuna's schema
