"""Planted secrets and injected lines, on the real PostgreSQL with the stand-in engine (issue 40,
findings 1 and 2).

Secrets: a password
in the storage URL's query, a token in ``engine.extra_args``, env values the name heuristic used to
miss (``DB_PASS``, a proxy URL with a password) and the API key a server prints before it misses its
boot deadline. A literal secret in the spec is refused at ``create`` (exit 2, nothing written, the
secret not echoed); written the supported way (``${NAME}``) it reaches the engine and nothing else.
Then every table of the storage, ``dump``, ``status`` (text and JSON), every export format, the
report, the dashboard notes, the engine's argv (``ps``) and every log is searched for each secret.

Injection: an engine whose ``/version`` carries a newline, a shell command and a Pod manifest; its
study's exports, as the CLI prints them, are sourced (``vllm`` stubbed) and parsed: no command runs, no
document is added. A model path with the same payload is refused at ``create``."""

from __future__ import annotations

import copy
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml
from optuna.trial import TrialState
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from nova_search import schema
from nova_search.testing.fault_table import note
from nova_search.testing.pg import fresh_database
from nova_search.testing.specs import fake_spec_dict
from nova_search.testing.workers import fake_engine_pids, wait_until
from tests.support import REPO
from tests.support.cli import nova

pytestmark = [pytest.mark.postgres, pytest.mark.faults]  # fault injection at full size: --all

#: what is planted -> its value (each unique, so that a find names its source)
SECRETS = {
    "storage ?password=": "pgQueryPw_41a7",
    "storage ?sslpassword=": "pgSslPw_93c2",
    "extra_args --hf-token": "hf_PlantedTok_5d1e",
    "engine.env DB_PASS": "dbPass_77f0",
    "engine.env HTTPS_PROXY password": "proxyPw_20b9",
}
#: the per-trial API key (48 hex digits, engine.command.new_api_key), wherever it is printed
API_KEY = re.compile(r"(?<![0-9a-f])[0-9a-f]{48}(?![0-9a-f])")

#: literal secrets in a spec: each must be refused at create
LITERALS = {
    "extra_args --hf-token": {"extra_args": ["--hf-token", SECRETS["extra_args --hf-token"]]},
    "extra_args --hf_token=": {"extra_args": [f"--hf_token={SECRETS['extra_args --hf-token']}"]},
    "engine.env DB_PASS": {"env": {"DB_PASS": SECRETS["engine.env DB_PASS"]}},
    "engine.env HTTPS_PROXY": {
        "env": {
            "HTTPS_PROXY": f"http://proxyuser:{SECRETS['engine.env HTTPS_PROXY password']}@proxy.invalid:3128"
        }
    },
}


def _spec(name: str, storage: str, engine_changes: dict, n_trials: int = 3) -> dict:
    raw = fake_spec_dict(n_trials, name=name, storage=storage)
    raw["engine"]["boot_timeout_s"] = 3
    for key, value in engine_changes.items():
        if key == "env":
            raw["engine"]["env"] = {**raw["engine"]["env"], **value}
        else:
            raw["engine"][key] = copy.deepcopy(value)
    return raw


def _all_tables(url: str) -> str:
    """Every value of every table of the storage, in full."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            tables = conn.execute(
                text("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename")
            ).scalars()
            return "\n".join(
                str(value)
                for table in list(tables)
                for row in conn.execute(text(f'SELECT * FROM "{table}"'))
                for value in row
            )
    finally:
        engine.dispose()


def _found(texts: dict[str, str]) -> list[str]:
    """``where: what`` for every planted secret (and any unmasked API key) in ``texts``."""
    out = [f"{where}: {what}" for where, body in texts.items() for what, s in SECRETS.items() if s in body]
    out += [f"{where}: an API key" for where, body in texts.items() if API_KEY.search(body)]
    return out


def test_planted_secrets_are_refused_or_masked_everywhere(tmp_path: Path) -> None:
    with fresh_database() as url:
        secret_url = (
            make_url(url)
            .update_query_dict(
                {
                    "password": SECRETS["storage ?password="],
                    "sslpassword": SECRETS["storage ?sslpassword="],
                }
            )
            .render_as_string(hide_password=False)
        )
        env = {"NOVA_STORAGE": secret_url}
        texts: dict[str, str] = {}
        refused: list[str] = []
        # 1. literal secrets in the spec: refused at create, exit 2, not echoed
        for i, (what, change) in enumerate(LITERALS.items()):
            path = tmp_path / f"literal{i}.yaml"
            path.write_text(yaml.safe_dump(_spec(f"literal{i}", secret_url, change)))
            created = nova("create", str(path), env=env, timeout=60)
            texts[f"create with {what}"] = created.stdout + created.stderr
            if created.returncode != 2:
                refused.append(f"{what}: create exited {created.returncode}, not 2")
        # 2. the supported way: ${NAME} references, the values in each worker's environment
        raw = _spec(
            "secrets",
            secret_url,
            {
                "env": {
                    "HF_TOKEN": "${HF_TOKEN}",
                    "DB_PASS": "${DB_PASS}",
                    "HTTPS_PROXY": "http://proxyuser:${PROXY_PW}@proxy.invalid:3128",
                },
            },
        )
        spec_path = tmp_path / "spec.yaml"
        spec_path.write_text(yaml.safe_dump(raw))
        env.update(
            HF_TOKEN=SECRETS["extra_args --hf-token"],
            DB_PASS=SECRETS["engine.env DB_PASS"],
            PROXY_PW=SECRETS["engine.env HTTPS_PROXY password"],
        )
        created = nova("create", str(spec_path), env=env, timeout=60)
        assert created.returncode == 0, created.stderr
        texts["create"] = created.stdout + created.stderr
        artifacts = tmp_path / "artifacts"
        worker = [sys.executable, "-m", "nova_search", "worker", "secrets", "--artifacts-dir", str(artifacts)]
        # a server that prints its API key, then misses its 3 s boot deadline
        slow = subprocess.run(
            [*worker, "--max-trials", "1"],
            cwd=REPO,
            env={**_base_env(), **env, "FAKE_ENGINE_BOOT_S": "6"},
            capture_output=True,
            text=True,
            timeout=120,
        )
        texts["worker (boot deadline)"] = slow.stdout + slow.stderr
        proc = subprocess.Popen(
            worker,
            cwd=REPO,
            env={**_base_env(), **env, "FAKE_ENGINE_ITL_S": "0.02"},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        wait_until(lambda: fake_engine_pids(), 60, "the engine")
        pid = fake_engine_pids()[0]
        texts["engine argv (ps)"] = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        environ = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
        texts["worker"] = proc.communicate(timeout=180)[0]
        assert proc.returncode == 0, texts["worker"][-3000:]
        # what the engine needs reaches it, through its private environment
        assert f"HF_TOKEN={SECRETS['extra_args --hf-token']}" in environ
        assert f"DB_PASS={SECRETS['engine.env DB_PASS']}" in environ
        trials = optuna.load_study(study_name="secrets", storage=url).get_trials()
        reasons = [schema.REASON.read(t.user_attrs) for t in trials if t.state == TrialState.FAIL]
        assert "timeout" in reasons, [(t.state, schema.REASON.read(t.user_attrs)) for t in trials]
        done = [t.number for t in trials if t.state == TrialState.COMPLETE]
        assert done, [(t.state, t.user_attrs) for t in trials]
        # 3. every reader
        notes = nova("notes", "secrets", env=env)
        assert notes.returncode == 0, notes.stderr
        texts["notes"] = notes.stdout + notes.stderr
        for args in (
            ("dump", "secrets"),
            ("dump", "secrets", "--format", "csv"),
            ("status", "secrets"),
            ("status", "secrets", "--format", "json"),
            *(
                ("export", "secrets", "--trial", str(done[0]), "--format", f)
                for f in ("vllm", "compose", "k8s")
            ),
        ):
            r = nova(*args, env=env)
            assert r.returncode == 0, (args, r.stderr[-2000:])
            texts[" ".join(args)] = r.stdout + r.stderr
        report = tmp_path / "report.html"
        r = nova("report", "secrets", "-o", str(report), env=env)
        assert r.returncode == 0, r.stderr[-2000:]
        texts["report"] = report.read_text() + r.stdout + r.stderr
        # a storage error names the URL masked (a wrong database on the same server)
        wrong = make_url(secret_url).set(database="nova_no_such_db").render_as_string(hide_password=False)
        r = nova("status", "secrets", env={**env, "NOVA_STORAGE": wrong, "NOVA_STORAGE_RETRY_S": "1"})
        assert r.returncode != 0
        texts["storage error"] = r.stdout + r.stderr
        texts["storage (every table)"] = _all_tables(url)
        texts["logs"] = "\n".join(p.read_text(errors="replace") for p in artifacts.rglob("*") if p.is_file())
        # the boot-deadline tail was stored, with the key the server printed masked
        tails = [schema.LOG_TAIL.read(t.user_attrs) or "" for t in trials]
        assert any("'api_key': ['" + "*" * 48 in x for x in tails), tails
        # the refused creates wrote nothing
        assert optuna.study.get_all_study_names(url) == ["secrets"]
        found = _found(texts)
        print(f"secrets found: {len(found)}; literal secrets not refused: {len(refused)}")
        note(
            "secrets",
            "5 planted secrets and the printed API key, searched in the storage, dump, status, exports, "
            "report, notes, logs and ps; 4 literal secrets given to create",
            secrets=len(found),
            refused=len(LITERALS) - len(refused),
            tried=len(LITERALS),
        )
        assert found == [] and refused == [], "\n".join(found + refused)
        # the storage URL is shown, masked (its query values too)
        assert "password=***" in texts["dump secrets"]


def _base_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "NOVA_STORAGE"}


#: what a hostile engine reports as its version: a shell line, then a Pod as a YAML document of its own
HOSTILE_VERSION = (
    "0.26.0\ntouch INJECTED\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: evil}\n"
    "spec: {hostPID: true, containers: [{name: x, image: busybox}]}\n#"
)
#: the stand-in engine, reporting $FAKE_VERSION on /version (one line: a command word has no newline)
VERSION_ENGINE = (
    "import dataclasses, os, sys; from nova_search.testing import fake_engine as f; s = f.serve; "
    "f.serve = lambda o, *a: s(dataclasses.replace(o, version=os.environ['FAKE_VERSION']), *a); "
    "f.main(sys.argv[1:])"
)


def test_an_engine_version_with_a_newline_injects_no_command_and_no_document(tmp_path: Path) -> None:
    with fresh_database() as url:
        raw = fake_spec_dict(1, name="inject")
        raw["engine"]["command"] = [sys.executable, "-c", VERSION_ENGINE]
        raw["engine"]["env"] = {**raw["engine"]["env"], "FAKE_VERSION": "${FAKE_VERSION}"}
        spec_path = tmp_path / "spec.yaml"
        spec_path.write_text(yaml.safe_dump(raw))
        env = {"NOVA_STORAGE": url, "FAKE_VERSION": HOSTILE_VERSION}
        r = nova("run", str(spec_path), "--artifacts-dir", str(tmp_path / "a"), env=env, timeout=180)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        (trial,) = optuna.load_study(study_name="inject", storage=url).get_trials()
        version = schema.ENGINE_VERSION.read(trial.user_attrs) or ""
        assert version.startswith("0.26.0\\ntouch INJECTED") and "\n" not in version, version
        exports = {}
        for fmt in ("vllm", "compose", "k8s"):
            r = nova("export", "inject", "--trial", str(trial.number), "--format", fmt, env=env)
            assert r.returncode == 0, r.stderr[-2000:]
            exports[fmt] = r.stdout
        run = tmp_path / "run"
        run.mkdir()
        (tmp_path / "export.sh").write_text(exports["vllm"])
        stub = 'vllm() { printf "%s\\n" "$1" >> calls; }; '
        subprocess.run(["bash", "-c", stub + f"source {tmp_path / 'export.sh'}"], cwd=run, timeout=30)
        k8s = list(yaml.safe_load_all(exports["k8s"]))
        compose = list(yaml.safe_load_all(exports["compose"]))
        commands = [p.name for p in run.iterdir() if p.name != "calls"]
        commands += (run / "calls").read_text().splitlines()[1:]  # vllm ran more than once
        note(
            "injection",
            "an engine version with a newline, a shell line and a Pod: its exports sourced and parsed",
            injected=len(commands) + len(k8s) - 3 + len(compose) - 1,
        )
        assert sorted(p.name for p in run.iterdir()) == ["calls"], exports["vllm"]  # no touch ran
        assert (run / "calls").read_text() == "serve\n"  # vllm ran once
        assert [d["kind"] for d in k8s] == ["PersistentVolumeClaim", "Service", "Deployment"], exports["k8s"]
        assert len(compose) == 1 and set(compose[0]) == {"services", "volumes"}, exports["compose"]
        # not a version: no image tag is made of it
        assert compose[0]["services"]["vllm"]["image"].endswith(":latest"), exports["compose"]


@pytest.mark.parametrize(
    "path",
    [
        "./m\ntouch INJECTED",
        "/m\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: evil}\n#",
        "./m\rtouch INJECTED",
        "./m\u2028touch INJECTED",
    ],
)
def test_a_model_path_with_a_line_break_is_refused_at_create(tmp_path: Path, path: str) -> None:
    with fresh_database() as url:
        raw = fake_spec_dict(1, name="inject")
        raw["model"]["path"] = path
        spec_path = tmp_path / "spec.yaml"
        spec_path.write_text(yaml.safe_dump(raw))
        r = nova("create", str(spec_path), "--storage", url, timeout=30)
        written = optuna.study.get_all_study_names(url)
        held = r.returncode == 2 and "path holds a control character" in r.stderr and not written
        note("injection", f"model.path {path!r} at create", refused=int(held), tried=1)
        assert r.returncode == 2, r.stdout + r.stderr
        assert "path holds a control character" in r.stderr and "Traceback" not in r.stderr
        assert written == []


# ---------------------------------------------------------------- hostile inputs of this family

PLANTED = "plantedSecret_3f9a"


def _extra(*args: str) -> dict[str, Any]:
    return {"engine.extra_args": list(args)}


def _env(key: str, value: str) -> dict[str, Any]:
    return {"engine.env": {key: value}}


#: (id, the spec's changes (dotted key -> value) or --set items, what the error names): each is refused
#: by ``create`` with exit 2, within 5 s, naming the field, writing nothing and never echoing PLANTED
HOSTILE: list[tuple[str, dict[str, Any] | list[str], str]] = [
    ("hf-token", _extra("--hf-token", PLANTED), "extra_args.0: --hf-token with a value"),
    ("hf_token=", _extra(f"--hf_token={PLANTED}"), "extra_args.0: --hf-token with a value"),
    ("hf-tok", _extra("--enforce-eager", "--hf-tok", PLANTED), "extra_args.1: --hf-token with a value"),
    ("api_key", _extra("--api_key", PLANTED), "must not set --api-key"),
    ("api-key=", _extra(f"--api-key={PLANTED}"), "must not set --api-key"),
    ("api-ke", _extra("--api-ke", PLANTED), "must not set --api-key"),
    ("api_key.x", _extra("--api_key.x", PLANTED), "must not set --api-key"),
    ("config", _extra("--config", "/tmp/evil.yaml"), "--config is refused"),
    ("config=", _extra("--config=/tmp/evil.yaml"), "--config is refused"),
    ("conf", _extra("--conf", "/tmp/evil.yaml"), "--config is refused"),
    ("port_", _extra("--po", "1"), "must not set --port"),
    ("host=", _extra("--host=0.0.0.0"), "must not set --host"),
    ("hos", _extra("--hos", "0.0.0.0"), "must not set --host"),
    ("url-in-arg", _extra("--otlp-traces-endpoint", f"https://u:{PLANTED}@otel"), "extra_args.1: a URL"),
    ("token-in-query", _extra("--x", f"http://h/?access_token={PLANTED}"), "extra_args.1: a URL"),
    ("env-db-pass", _env("DB_PASS", PLANTED), "env.DB_PASS looks like a secret"),
    ("env-pwd", _env("MY_PWD", PLANTED), "env.MY_PWD looks like a secret"),
    ("env-auth", _env("PROXY_AUTH", PLANTED), "env.PROXY_AUTH looks like a secret"),
    ("env-cookie", _env("SESSION_COOKIE", PLANTED), "env.SESSION_COOKIE looks like a secret"),
    ("env-pgpassword", _env("PGPASSWORD", PLANTED), "env.PGPASSWORD looks like a secret"),
    ("env-proxy-url", _env("HTTPS_PROXY", f"http://u:{PLANTED}@proxy:3128"), "env.HTTPS_PROXY holds a URL"),
    ("env-token-user", _env("GIT_REMOTE", f"https://{PLANTED}@github.com/x"), "env.GIT_REMOTE holds a URL"),
    ("env-dsn", _env("DSN", f"postgresql://db/x?password={PLANTED}"), "env.DSN holds a URL"),
    ("env-default", _env("HTTPS_PROXY", f"http://u:${{PW:-{PLANTED}}}@p"), "env.HTTPS_PROXY holds a URL"),
    ("set-api_key", ["engine.extra_args=[--api_key, k]"], "must not set --api-key"),
    ("set-hf-token", [f"engine.extra_args=[--hf-token, {PLANTED}]"], "--hf-token with a value"),
    ("set-db-pass", [f"engine.env.DB_PASS={PLANTED}"], "env.DB_PASS looks like a secret"),
    ("path-newline", {"model.path": "./m\ntouch INJECTED"}, "path holds a control character (\\n)"),
    ("path-pod", {"model.path": "/m\n---\nkind: Pod\n#"}, "path holds a control character"),
    ("path-cr", {"model.path": "./m\rtouch INJECTED"}, "path holds a control character (\\r)"),
    ("path-nel", {"model.path": "./m\x85touch"}, "path holds a control character (\\x85)"),
    ("path-u2028", {"model.path": "./m\u2028touch"}, "path holds a control character (\\u2028)"),
    ("path-esc", {"model.path": "./m\x1b[2J"}, "path holds a control character (\\x1b)"),
    ("served-newline", {"model.served_name": "m\ntouch X"}, "served_name holds a control character"),
    ("host-newline", {"engine.host": "127.0.0.1\n"}, "host holds a control character"),
    ("command-newline", {"engine.command": ["vllm\ntouch X", "serve"]}, "command.0 holds a control"),
    ("set-path-newline", ['model.path="./m\\ntouch INJECTED"'], "path holds a control character"),
    ("assign-in-arg", _extra("--x", f"AWS_SECRET_ACCESS_KEY={PLANTED}"), "extra_args.1: a URL"),
    (
        "command-docker-e",
        {"engine.command": ["docker", "run", "-e", f"HF_TOKEN={PLANTED}", "i"]},
        "command.3: a URL",
    ),
    ("path-url-secret", {"model.path": f"s3://AKIA:{PLANTED}@bucket/m"}, "path holds a URL with a password"),
]


def _hostile(tmp_path: Path, row: tuple[str, dict[str, Any] | list[str], str]) -> tuple[str, str]:
    """Run one row; '' when it holds, else what went wrong."""
    rid, change, needle = row
    folder = tmp_path / rid
    folder.mkdir()
    raw = fake_spec_dict(1, name="hostile")
    overrides: list[str] = []
    if isinstance(change, list):
        overrides = change
    else:
        for key, value in change.items():
            node = raw
            *parents, last = key.split(".")
            for part in parents:
                node = node[part]
            node[last] = value
    (folder / "spec.yaml").write_text(yaml.safe_dump(raw))
    storage = f"sqlite:///{folder / 'nova.db'}"
    argv = ["create", str(folder / "spec.yaml"), "--storage", storage]
    argv += [a for o in overrides for a in ("--set", o)]
    t0 = time.monotonic()
    r = nova(*argv, timeout=30)
    took = time.monotonic() - t0
    said = r.stdout + r.stderr
    problems = []
    if r.returncode != 2:
        problems.append(f"exit {r.returncode}")
    if took > 5.0:
        problems.append(f"took {took:.1f} s")
    if needle not in said:
        problems.append(f"does not say {needle!r}")
    if "Traceback" in said or PLANTED in said:
        problems.append("a traceback or the planted secret in its output")
    if sorted(p.name for p in folder.iterdir()) != ["spec.yaml"]:
        problems.append(f"wrote {sorted(p.name for p in folder.iterdir())}")
    return rid, "; ".join(problems) + (f": {said[-400:]}" if problems else "")


@pytest.mark.serial  # it bounds how long a refusal takes
def test_hostile_secrets_and_line_breaks_are_refused_at_create_fast_writing_nothing(tmp_path: Path) -> None:
    """40 hostile inputs of this family (secrets in the spec, the guard's spellings, line breaks in
    paths and names), through the real command line, 4 at a time."""
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda row: _hostile(tmp_path, row), HOSTILE))
    failed = [f"{rid}: {problem}" for rid, problem in results if problem]
    print(f"hostile inputs refused: {len(HOSTILE) - len(failed)} of {len(HOSTILE)}")
    note(
        "secrets",
        f"{len(HOSTILE)} hostile inputs: secrets in the spec, the guard's spellings, line breaks",
        refused=len(HOSTILE) - len(failed),
        tried=len(HOSTILE),
    )
    assert failed == [], "\n".join(failed)
