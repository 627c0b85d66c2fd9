"""Secrets stay out of what nova stores and out of the server's environment; names stay file names."""

from __future__ import annotations

import sys

import pytest

from nova_search import redact
from nova_search.db import mask
from nova_search.engine.command import (
    build_launch,
    deployable_argv,
    engine_environment,
    new_api_key,
    unresolved_references,
)
from nova_search.engine.server import Server, free_port, tail
from nova_search.errors import EngineError, SpecError, TrialFailure
from nova_search.knobs import EngineConfig
from nova_search.spec import EngineSpec, ModelSpec, check_study_name, parse_spec, redacted_spec
from nova_search.testing.specs import FAKE_ENGINE, minimal_spec_dict

WORKER_ENV = {
    "PATH": "/usr/bin",
    "HOME": "/home/w",
    "NOVA_STORAGE": "postgresql+psycopg://nova:hunter2@db/nova",
    "PGPASSWORD": "hunter2",
    "AWS_SECRET_ACCESS_KEY": "s3cr3t",
    "HF_TOKEN": "hf_abc",
    "CUDA_VISIBLE_DEVICES": "0,1",
    "NCCL_NVLS_ENABLE": "0",
    "VLLM_API_KEY": "an old key",
    "LC_ALL": "C.UTF-8",
    "PYTHONPATH": "/tmp/site",
}


def test_the_server_inherits_what_it_needs_and_none_of_novas_secrets():
    env = engine_environment(WORKER_ENV, {"VLLM_ATTENTION_BACKEND": "FLASHINFER"})
    assert env["PATH"] == "/usr/bin" and env["NCCL_NVLS_ENABLE"] == "0" and env["HF_TOKEN"] == "hf_abc"
    assert env["PYTHONPATH"] == "/tmp/site" and env["LC_ALL"] == "C.UTF-8"
    assert env["VLLM_ATTENTION_BACKEND"] == "FLASHINFER"
    for gone in ("NOVA_STORAGE", "PGPASSWORD", "AWS_SECRET_ACCESS_KEY", "VLLM_API_KEY"):
        assert gone not in env
    assert "hunter2" not in repr(env)


def test_references_in_engine_env_are_filled_from_the_worker_or_named_when_missing():
    env = engine_environment(WORKER_ENV, {"HF_TOKEN": "${HF_TOKEN}", "X": "a-${MISSING:-dflt}-b"})
    assert env["HF_TOKEN"] == "hf_abc" and env["X"] == "a-dflt-b"
    assert unresolved_references({"TOKEN": "${NOPE}", "Y": "${NOPE2:-}"}, WORKER_ENV) == [
        "engine.env.TOKEN: ${NOPE}"
    ]
    with pytest.raises(
        EngineError, match=r"engine.env.TOKEN: \$\{NOPE\} is not set in this worker's environment"
    ):
        engine_environment(WORKER_ENV, {"TOKEN": "${NOPE}"})


def test_a_launch_carries_a_fresh_key_and_the_minimal_environment(monkeypatch):
    for k, v in WORKER_ENV.items():
        monkeypatch.setenv(k, v)
    plan = build_launch(
        EngineSpec(command=["vllm", "serve"]), ModelSpec(path="/m"), EngineConfig(), port=1, api_key="k1"
    )
    assert plan.api_key == "k1" and "VLLM_API_KEY" not in plan.env and "NOVA_STORAGE" not in plan.env
    assert not any("hunter2" in a or "k1" in a for a in plan.argv)


@pytest.mark.parametrize("key", ["HF_TOKEN", "WANDB_API_KEY", "MY_PASSWORD", "aws_secret", "OPENAI_APIKEY"])
def test_a_literal_secret_in_engine_env_is_refused_naming_the_field(key):
    raw = minimal_spec_dict()
    raw["engine"]["env"] = {key: "literal-value"}
    with pytest.raises(
        SpecError, match=rf"engine: .*env.{key} looks like a secret.*write it as '\$\{{{key}\}}'"
    ):
        parse_spec(raw)
    raw["engine"]["env"] = {key: "${" + key + "}"}
    assert parse_spec(raw).engine.env[key] == "${" + key + "}"


def test_the_stored_spec_masks_the_storage_password():
    spec = parse_spec(minimal_spec_dict(storage="postgresql+psycopg://nova:hunter2@db:5432/nova"))
    stored = redacted_spec(spec)
    assert stored["storage"] == "postgresql+psycopg://nova:***@db:5432/nova"
    assert "hunter2" not in repr(stored)


@pytest.mark.parametrize("name", ["../../escape", "..", ".hidden", "a/b", "a b", "", "-x", "x" * 129, "é"])
def test_unsafe_study_names_are_refused(name):
    with pytest.raises(SpecError, match="not a safe study name"):
        check_study_name(name, "--study-name")
    with pytest.raises(SpecError, match="name"):
        parse_spec(minimal_spec_dict(name=name))


@pytest.mark.parametrize("name", ["qwen3-8b", "a.b_c-1", "X", "tune.speculative"])
def test_safe_study_names_pass(name):
    assert check_study_name(name) == name and parse_spec(minimal_spec_dict(name=name)).name == name


# ---------------------------------------------------------------- issue 40: secrets by where they are


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            "postgresql+psycopg://nova@db/nova?password=hunter2",
            "postgresql+psycopg://nova@db/nova?password=***",
        ),
        (
            "postgresql+psycopg://nova:pw1@db/nova?sslpassword=hunter2&sslmode=require&passfile=/s/.pgpass",
            "postgresql+psycopg://nova:***@db/nova?passfile=***&sslmode=require&sslpassword=***",
        ),
        (
            "postgresql://db/nova?auth_token=hunter2&application_name=x",
            "postgresql://db/nova?application_name=x&auth_token=***",
        ),
        ("sqlite:///nova.db", "sqlite:///nova.db"),
        # issue 53: options carries server settings (a password among them), an unknown one anything
        (
            "postgresql+psycopg://nova@db/nova?options=-c%20password%3Dhunter2&connect_timeout=5",
            "postgresql+psycopg://nova@db/nova?connect_timeout=5&options=***",
        ),
        ("postgresql://db/nova?bogus=hunter2", "postgresql://db/nova?bogus=***"),
        ("sqlite:///nova.db?timeout=30", "sqlite:///nova.db?timeout=30"),
    ],
)
def test_the_storage_url_is_masked_in_its_password_and_its_secret_query_parameters(url, shown):
    assert mask(url) == shown
    stored = redacted_spec(parse_spec(minimal_spec_dict(storage=url)))
    assert stored["storage"] == shown and "hunter2" not in repr(stored) and "pw1" not in repr(stored)


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--api_key", "known"], "--api-key"),
        (["--api-key=known"], "--api-key"),
        (["--api-ke", "known"], "--api-key"),  # argparse's abbreviation
        (["--API_KEY", "known"], None),  # not a flag vLLM reads (names are case-sensitive): allowed
        (["--port=1"], "--port"),
        (["--ho", "0.0.0.0"], "--host"),
        (["--config", "mine.yaml"], "--config"),
        (["--config=mine.yaml"], "--config"),
        (["--conf", "mine.yaml"], "--config"),
    ],
)
def test_the_extra_args_guard_reads_flags_as_vllm_does(args, flag):
    """vLLM maps ``_`` to ``-`` in flag names, reads ``--flag=value``, and argparse takes an unambiguous
    prefix for the flag; ``--config`` (a file that can set any flag) is refused."""
    raw = minimal_spec_dict()
    raw["engine"]["extra_args"] = args
    if flag is None:
        assert parse_spec(raw).engine.extra_args == args
        return
    with pytest.raises(SpecError, match=rf"engine: extra_args.0: .*{flag}") as e:
        parse_spec(raw)
    assert "known" not in str(e.value) and "mine.yaml" not in str(e.value)


@pytest.mark.parametrize(
    "args",
    [
        ["--hf-token", "hf_planted"],
        ["--hf_token=hf_planted"],
        ["--hf-tok", "hf_planted"],
        ["--otlp-traces-endpoint", "https://user:hf_planted@otel.example"],
        ["--kv-transfer-config", '{"url": "http://h/x?token=hf_planted"}'],
        ["--x", "AWS_SECRET_ACCESS_KEY=hf_planted"],
    ],
)
def test_a_secret_in_extra_args_is_refused_without_being_echoed(args):
    raw = minimal_spec_dict()
    raw["engine"]["extra_args"] = ["--enforce-eager", *args]
    with pytest.raises(SpecError, match=r"extra_args.[12]: .*engine.env") as e:
        parse_spec(raw)
    assert "hf_planted" not in str(e.value)


def test_a_bare_hf_token_flag_holds_no_secret_and_is_allowed():
    raw = minimal_spec_dict()
    raw["engine"]["extra_args"] = ["--hf-token", "--enforce-eager"]
    assert parse_spec(raw).engine.extra_args == ["--hf-token", "--enforce-eager"]


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("DB_PASS", "planted"),
        ("PGPASSFILE_PASS", "planted"),
        ("PROXY_AUTH", "Basic planted"),
        ("MY_PWD", "planted"),
        ("SESSION_COOKIE", "planted"),
        ("HTTPS_PROXY", "http://user:planted@proxy:3128"),
        ("GIT_URL", "https://planted@github.com/x"),
        ("DSN", "postgresql://db/x?password=planted"),
        ("HTTPS_PROXY", "http://user:${PW:-planted}@proxy:3128"),  # a default is literal
    ],
)
def test_a_secret_in_engine_env_is_recognised_by_name_or_by_value(key, value):
    raw = minimal_spec_dict()
    raw["engine"]["env"] = {key: value}
    with pytest.raises(SpecError, match=rf"env.{key} (looks like a secret|holds a URL)") as e:
        parse_spec(raw)
    assert "planted" not in str(e.value)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("HTTPS_PROXY", "http://user:${PROXY_PW}@proxy:3128"),
        ("HTTPS_PROXY", "http://proxy:3128"),
        ("DB_PASS", "${DB_PASS}"),
        ("TOKENIZERS_PARALLELISM", "false"),
        ("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1"),  # a switch, not a secret
        ("VLLM_ATTENTION_BACKEND", "FLASHINFER"),
        ("HF_ENDPOINT", "https://hf.example/models?revision=main"),
    ],
)
def test_references_and_plain_values_in_engine_env_pass(key, value):
    raw = minimal_spec_dict()
    raw["engine"]["env"] = {key: value}
    assert parse_spec(raw).engine.env[key] == value


def test_a_stored_argv_shows_no_secret_flag_value():
    argv = ["vllm", "serve", "/m", "--hf_token", "hf_x", "--api-key=k", "HF_TOKEN=hf_y", "X=${Y}"]
    argv += ["--u", "http://a:pw@h", "--hf-token", "--host", "h", "--port", "1"]
    assert deployable_argv(argv) == [
        "vllm", "serve", "/m", "--hf_token", "***", "--api-key=***", "HF_TOKEN=***", "X=${Y}",
        "--u", "http://a:***@h", "--hf-token",
    ]  # fmt: skip


def test_one_line_escapes_every_line_break():
    assert redact.one_line("a\nb\rc\x85d\u2028e\x1bf\tg") == "a\\nb\\rc\\x85d\\u2028e\\x1bf\\tg"


def test_a_server_that_misses_its_boot_deadline_leaves_no_key_in_its_tail_or_log(tmp_path):
    """The stand-in prints the key it read from --config (as vLLM 0.26 does), then takes 60 s to listen:
    the 6 s deadline passes (long enough for the stand-in to start and print on a loaded machine; with
    1 s it had printed nothing yet under a load average of 18). The tail stored on the trial, and the
    log file, hold the key masked."""
    key = new_api_key()
    engine = EngineSpec(
        command=[sys.executable, "-m", FAKE_ENGINE], device="cpu", env={"FAKE_ENGINE_BOOT_S": "60"}
    )
    plan = build_launch(engine, ModelSpec(path="m"), EngineConfig(), port=free_port(), api_key=key)
    server = Server(plan, tmp_path / "server.log", boot_timeout_s=6.0, poll_interval_s=0.1)
    with pytest.raises(TrialFailure) as e:
        with server:
            pass
    assert e.value.reason == "timeout" and "api_key" in e.value.log_tail
    assert key not in e.value.log_tail and "*" * len(key) in e.value.log_tail
    assert key not in server.log_path.read_text()


def test_a_tail_read_while_the_server_runs_masks_a_key(tmp_path):
    """run.py reads the tail itself on an interrupt during boot, before the server masked its log."""
    key = new_api_key()
    log = tmp_path / "server.log"
    log.write_text(f"non-default args: {{'api_key': ['{key}']}}\nsha256 {'a' * 64}\n")
    text = tail(log)
    assert key not in text and "*" * 48 in text and "a" * 64 in text


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("command", ["docker", "run", "-e", "HF_TOKEN=hf_planted", "img"], "engine: command.3: a URL"),
        ("command", ["vllm", "serve", "--download-dir", "s3://k:hf_planted@b"], "engine: command.3"),
        ("path", "s3://AKIA:hf_planted@bucket/m", "model: path holds a URL with a password"),
    ],
)
def test_a_secret_in_the_command_or_the_model_path_is_refused_without_being_echoed(field, value, says):
    raw = minimal_spec_dict()
    raw["engine" if field == "command" else "model"][field] = value
    with pytest.raises(SpecError, match=says) as e:
        parse_spec(raw)
    assert "hf_planted" not in str(e.value)
    raw["engine"]["command"] = ["docker", "run", "-e", "HF_TOKEN", "img"]  # the name alone: allowed
    raw["model"]["path"] = "s3://bucket/m"
    assert parse_spec(raw).engine.command == ["docker", "run", "-e", "HF_TOKEN", "img"]


#: spellings of the flags nova sets, or of a secret flag with a value, as a user might write them
#: (``--config=FILE`` is refused too, but vLLM 0.32 reads a config file only after a bare ``--config``)
SPELLINGS = [
    ["--api_key", "K1"],
    ["--api-key=K1"],
    ["--api-ke", "K1"],
    ["--port", "1234"],
    ["--por=1234"],
    ["--hos", "10.9.8.7"],
    ["--host=10.9.8.7"],
    ["--hf_token", "K1"],
    ["--hf-tok=K1"],
    ["--config", "{config}"],
]
#: vLLM's own parser reads each spelling: which of nova's values (or the token) it would replace
VLLM_READS = """
import json, sys
from vllm.utils.argparse_utils import FlexibleArgumentParser
try:
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
except ImportError:
    from vllm.entrypoints.openai.cli_args import make_arg_parser
parser = make_arg_parser(FlexibleArgumentParser())
out = []
for args in json.loads(sys.argv[1]):
    try:
        ns = parser.parse_args(["m", *args])
    except SystemExit:
        out.append(None)
        continue
    out.append([ns.api_key == ["K1"], ns.port == 1234, ns.host == "10.9.8.7", ns.hf_token == "K1"])
print(json.dumps(out))
"""


@pytest.mark.engine
def test_every_spelling_the_guard_refuses_is_one_the_real_vllm_reads(engine_python, tmp_path):
    """The guard's premise, checked against the installed vLLM: each spelling sets the API key, the
    port, the host or the token there (``_`` for ``-``, ``=value``, argparse's abbreviations, a config
    file), and the spec refuses each one."""
    import json
    import subprocess

    config = tmp_path / "mine.yaml"
    config.write_text("port: 1234\napi-key: K1\n")
    spellings = [[a.format(config=config) for a in args] for args in SPELLINGS]
    r = subprocess.run(
        [engine_python, "-c", VLLM_READS, json.dumps(spellings)], capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr[-3000:]
    reads = json.loads(r.stdout.strip().splitlines()[-1])
    for args, read in zip(spellings, reads, strict=True):
        assert read is not None and any(read), (args, read)  # vLLM takes it for a guarded flag
        raw = minimal_spec_dict()
        raw["engine"]["extra_args"] = args
        with pytest.raises(SpecError, match=r"extra_args.0: "):
            parse_spec(raw)


#: spellings of the flags that say what a server serves and on how many GPUs (issue 53): the model,
#: the served name, tensor/pipeline/data parallel sizes, in their long, short, ``_``, ``=`` and
#: abbreviated forms
OWN_SPELLINGS = [
    ["--served-model-name", "X9"],
    ["--served_model_name=X9"],
    ["--served-model", "X9"],
    ["--model=X9"],
    ["-tp", "2"],
    ["-tp=2"],
    ["-t", "2"],
    ["--tensor-parallel", "2"],
    ["--tensor_parallel_size=2"],
    ["-pp", "2"],
    ["--pipeline-parallel-size=2"],
    ["-dp", "2"],
    ["--data_parallel_size", "2"],
]
VLLM_READS_OWN = """
import json, sys
from vllm.utils.argparse_utils import FlexibleArgumentParser
try:
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
except ImportError:
    from vllm.entrypoints.openai.cli_args import make_arg_parser
parser = make_arg_parser(FlexibleArgumentParser())
out = []
for args in json.loads(sys.argv[1]):
    try:
        ns = parser.parse_args(["--model", "m", *args])
    except SystemExit:
        out.append(None)
        continue
    out.append([ns.model == "X9", ns.served_model_name == ["X9"], ns.tensor_parallel_size == 2,
                ns.pipeline_parallel_size == 2, ns.data_parallel_size == 2])
print(json.dumps(out))
"""


@pytest.mark.engine
def test_every_spelling_of_novas_own_flags_is_one_the_real_vllm_reads_and_is_refused(engine_python):
    """Issue 53's guard, checked against the installed vLLM: each spelling replaces nova's model, served
    name or a GPU count there (vLLM takes the last value given), and the spec refuses each one."""
    import json
    import subprocess

    r = subprocess.run(
        [engine_python, "-c", VLLM_READS_OWN, json.dumps(OWN_SPELLINGS)], capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    reads = json.loads(r.stdout.strip().splitlines()[-1])
    for args, read in zip(OWN_SPELLINGS, reads, strict=True):
        assert read is not None and any(read), (args, read)
        raw = minimal_spec_dict()
        raw["engine"]["extra_args"] = args
        with pytest.raises(SpecError, match=r"extra_args.0: extra_args must not set"):
            parse_spec(raw)


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("env", {"DB_PASS": 987654321}, "engine: env.DB_PASS: a string is expected, not a number"),
        ("env", {"X": ["987654321"]}, "engine: env.X: a string is expected, not a list"),
        ("extra_args", ["--x", 987654321], "engine: extra_args.1: a string is expected, not a number"),
        ("command", ["vllm", 987654321], "engine: command.1: a string is expected, not a number"),
    ],
)
def test_a_value_of_the_wrong_type_is_refused_without_being_echoed(field, value, says):
    """A validation error shows what it got; an unquoted numeric password must not be shown."""
    raw = minimal_spec_dict()
    raw["engine"][field] = value
    with pytest.raises(SpecError, match=says) as e:
        parse_spec(raw)
    assert "987654321" not in str(e.value)
