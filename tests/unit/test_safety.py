"""Secrets stay out of what nova stores and out of the server's environment; names stay file names."""

from __future__ import annotations

import pytest

from benchmarks.harness.specs import minimal_spec_dict
from nova_search.engine.command import build_launch, engine_environment, unresolved_references
from nova_search.engine.config import EngineConfig
from nova_search.errors import EngineError, SpecError
from nova_search.spec import EngineSpec, ModelSpec, check_study_name, parse_spec, redacted_spec

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
