"""Every exit code of the table (``errors.ExitCode``, docs/commands.md#exit-codes) from a real command on
a real PostgreSQL study run by ``nova-search run`` on the stand-in engine, and the docs' deploy gate,
run as written: it tells "nothing qualifies" from "storage down" by the exit code alone. (130, the
interrupt, is shown by tests/integration/test_cli_interrupt.py.)"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from nova_search.errors import ExitCode
from nova_search.testing.pg import fresh_database
from nova_search.testing.specs import FAKE_ENGINE_ENV, minimal_spec_dict
from nova_search.testing.workers import fake_engines
from tests.support import REPO
from tests.support.cli import nova

pytestmark = pytest.mark.postgres

#: a condition the stand-in meets easily at concurrency 32: the gate's own (docs/commands.md)
SLO = "ttft_p99_ms<=500@32"


def _spec(tmp: Path, name: str, **env: str) -> str:
    raw = minimal_spec_dict(name=name, sweep={"concurrency": [32], "requests": 32})
    raw["engine"]["env"] = dict(FAKE_ENGINE_ENV) | env
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    """Two studies: ``good`` (one COMPLETE trial) and ``broken`` (its one trial FAILED: the engine
    refuses a flag every configuration carries), each run by ``nova-search run``."""
    tmp = tmp_path_factory.mktemp("codes")
    with fresh_database() as url:
        good = nova("run", _spec(tmp, "good"), "--storage", url, timeout=240)
        assert good.returncode == ExitCode.OK, good.stderr[-3000:]
        broken = nova(
            "run",
            _spec(tmp, "broken", FAKE_ENGINE_REFUSE="--served-model-name"),
            "--storage",
            url,
            timeout=240,
        )
        yield url, broken, good
    assert fake_engines() == []


def test_run_ends_with_the_deploy_answer_and_the_policy_command(db):
    """The user's last screen is the answer (issue 53): one line naming the trial and its command, then
    where the evidence is; not the ranking table, whose top row need not be what to run."""
    url, _, good = db
    last = [line for line in good.stdout.splitlines() if line.strip()][-2:]
    answer = json.loads(nova("policy", "good", "--storage", url, "--format", "json").stdout)
    (r,) = answer["ranges"]
    trial = r["configuration"]["trial"]
    assert last[0] == f"What to deploy: trial {trial} (tuned) at every load: {r['command']}"
    assert last[1] == f"why, the evidence and the other loads: nova-search policy good --storage {url}"


def test_run_with_every_trial_failed_exits_3(db):
    _, broken, _ = db
    assert broken.returncode == ExitCode.NOTHING_MEASURED == 3, broken.stderr[-3000:]
    assert "Every trial of this study failed or was pruned" in broken.stderr


def test_an_answer_exits_0_and_none_exits_4(db):
    url, _, _ = db
    r = nova("best", "good", "--storage", url, "--where", SLO, "--format", "argv")
    assert r.returncode == ExitCode.OK == 0, r.stderr
    assert r.stdout.startswith("vllm serve fake-model ")  # the stored deployable command, not the stand-in's
    for where in ("ttft_p99_ms<=0.000001@32", "ttft_p99_ms<=500@4"):  # nothing that fast; 4 not measured
        r = nova("best", "good", "--storage", url, "--where", where)
        assert r.returncode == ExitCode.NOTHING_QUALIFIES == 4, r.stderr
        assert r.stdout == "" and "no feasible COMPLETE trial in study 'good'" in r.stderr
    r = nova("best", "broken", "--storage", url)
    assert r.returncode == ExitCode.NOTHING_QUALIFIES and "no feasible COMPLETE trial" in r.stderr
    r = nova("export", "broken", "--storage", url)  # no policy: nothing to deploy
    assert r.returncode == ExitCode.NOTHING_QUALIFIES and "nothing to deploy" in r.stderr
    assert r.stdout == ""


def test_bad_input_exits_2(db):
    url, _, _ = db
    r = nova("status", "absent", "--storage", url)
    assert r.returncode == ExitCode.BAD_INPUT == 2 and "no study named 'absent'" in r.stderr
    # a trial the engine refused at boot: never measured, nothing to deploy
    r = nova("export", "broken", "--storage", url, "--trial", "0")
    assert r.returncode == ExitCode.BAD_INPUT and "--trial 0: trial 0 is " in r.stderr
    assert "measured no level" in r.stderr
    assert r.stdout == ""
    r = nova("best", "good", "--storage", url, "--where", "ttft_p99_ms=5@32")
    assert r.returncode == ExitCode.BAD_INPUT and "--where" in r.stderr


def test_storage_down_exits_5():
    down = "postgresql+psycopg://postgres:hunter2@127.0.0.1:1/nova"  # nothing listens on port 1
    r = nova("best", "good", "--storage", down, "--where", SLO)
    assert r.returncode == ExitCode.STORAGE == 5, r.stderr
    assert "OperationalError" in r.stderr and "hunter2" not in r.stderr


def _gate() -> str:
    """The deploy gate of docs/commands.md, as written there."""
    page = (REPO / "docs" / "commands.md").read_text()
    m = re.search(r"<!-- gate:[^\n]*-->\n```bash\n(.*?)```", page, flags=re.S)
    assert m, "docs/commands.md lost its deploy-gate snippet"
    assert SLO in m.group(1)
    return m.group(1)


def _run_gate(study: str, storage: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "NOVA_STORAGE"}
    env |= {
        "STUDY": study,
        "NOVA_STORAGE": storage,
        "NOVA_STORAGE_RETRY_S": "0",
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
    }
    return subprocess.run(
        ["bash", "-c", _gate()], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_the_docs_deploy_gate_tells_nothing_qualifies_from_storage_down(db, tmp_path):
    url, _, _ = db
    ok = _run_gate("good", url, tmp_path)
    assert ok.returncode == 0 and ok.stdout.startswith("deploy: "), ok.stderr
    assert ok.stdout.startswith("deploy: vllm serve fake-model ")  # the stored deployable command
    none = _run_gate("broken", url, tmp_path)
    assert none.returncode == 0 and none.stdout.strip() == "nothing qualifies: keep the current deployment"
    down = _run_gate("good", "postgresql+psycopg://postgres@127.0.0.1:1/nova", tmp_path)
    assert down.returncode == 75 and "storage down: retry the gate later" in down.stderr
    assert down.stdout == ""
