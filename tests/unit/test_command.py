"""EngineConfig -> argv: flags, the speculative JSON, secrets in the environment only."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from nova_search.engine.command import (
    API_SERVER_MODULE,
    FLAGS,
    build_launch,
    config_args,
    deployable_argv,
    engine_prefix,
    new_api_key,
    served_name,
)
from nova_search.errors import EngineError
from nova_search.knobs import EngineConfig, SpeculativeConfig
from nova_search.spec import EngineSpec, ModelSpec

MODEL = ModelSpec(path="/models/tiny", served_name="tiny")
SECRET = "sk-test-9f8e7d6c"


def flag_value(argv: list[str] | tuple[str, ...], flag: str) -> str:
    i = list(argv).index(flag)
    return argv[i + 1]


# ---------------------------------------------------------------- config_args


def test_empty_config_gives_no_flags() -> None:
    assert config_args(EngineConfig()) == []


def test_values_are_stringified() -> None:
    args = config_args(
        EngineConfig(kv_cache_dtype="fp8", gpu_memory_utilization=0.85, max_num_seqs=64, max_model_len=4096)
    )
    assert args == [
        "--kv-cache-dtype",
        "fp8",
        "--gpu-memory-utilization",
        "0.85",
        "--max-num-seqs",
        "64",
        "--max-model-len",
        "4096",
    ]


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("enable_prefix_caching", True, "--enable-prefix-caching"),
        ("enable_prefix_caching", False, "--no-enable-prefix-caching"),
        ("enable_chunked_prefill", True, "--enable-chunked-prefill"),
        ("enable_chunked_prefill", False, "--no-enable-chunked-prefill"),
    ],
)
def test_bools_become_flag_pairs(field: str, value: bool, expected: str) -> None:
    assert config_args(EngineConfig(**{field: value})) == [expected]


def test_none_fields_are_omitted() -> None:
    args = config_args(EngineConfig(max_num_seqs=8, enable_prefix_caching=None, speculative=None))
    assert args == ["--max-num-seqs", "8"]
    assert "--speculative-config" not in args
    assert not any("prefix" in a for a in args)


def test_flag_order_follows_the_table() -> None:
    # given in the reverse of FLAGS order on purpose: argv order must not depend on it
    config = EngineConfig(
        speculative=SpeculativeConfig(method="ngram", num_speculative_tokens=3),
        max_cudagraph_capture_size=256,
        tensor_parallel_size=2,
        max_model_len=2048,
        attention_backend="FLASH_ATTN",
        enable_chunked_prefill=False,
        enable_prefix_caching=True,
        max_num_batched_tokens=8192,
        max_num_seqs=128,
        gpu_memory_utilization=0.9,
        kv_cache_dtype="auto",
    )
    args = config_args(config)
    flags = [a for a in args if a.startswith("--")]
    expected = [
        "--kv-cache-dtype",
        "--gpu-memory-utilization",
        "--max-num-seqs",
        "--max-num-batched-tokens",
        "--enable-prefix-caching",
        "--no-enable-chunked-prefill",
        "--attention-backend",
        "--max-model-len",
        "--tensor-parallel-size",
        "--max-cudagraph-capture-size",
        "--speculative-config",
    ]
    assert flags == expected
    assert len(FLAGS) == len(expected)
    assert flag_value(args, "--tensor-parallel-size") == "2"
    assert flag_value(args, "--max-num-batched-tokens") == "8192"


def test_every_engine_config_field_has_a_flag() -> None:
    assert set(FLAGS) == set(EngineConfig.__dataclass_fields__)


# ---------------------------------------------------------------- --speculative-config


def spec_json(config: EngineConfig) -> tuple[str, dict]:
    args = config_args(config)
    raw = flag_value(args, "--speculative-config")
    return raw, json.loads(raw)


def test_ngram_speculative_config() -> None:
    raw, d = spec_json(
        EngineConfig(
            speculative=SpeculativeConfig(
                method="ngram", num_speculative_tokens=4, prompt_lookup_min=2, prompt_lookup_max=5
            )
        )
    )
    assert d == {
        "method": "ngram",
        "num_speculative_tokens": 4,
        "prompt_lookup_min": 2,
        "prompt_lookup_max": 5,
    }
    assert " " not in raw  # compact separators: one argv element, no spaces


def test_draft_model_speculative_config() -> None:
    _, d = spec_json(
        EngineConfig(
            speculative=SpeculativeConfig(
                method="draft_model", num_speculative_tokens=3, model="/models/draft"
            )
        )
    )
    assert d == {"method": "draft_model", "num_speculative_tokens": 3, "model": "/models/draft"}
    assert "prompt_lookup_min" not in d  # unset keys are left out, not null


def test_dynamic_schedule_is_lists() -> None:
    sc = SpeculativeConfig(
        method="eagle3",
        num_speculative_tokens=4,
        model="org/eagle3",
        num_speculative_tokens_per_batch_size=((1, 8, 4), (9, 64, 2)),
    )
    raw, d = spec_json(EngineConfig(speculative=sc))
    assert d["num_speculative_tokens_per_batch_size"] == [[1, 8, 4], [9, 64, 2]]
    assert '"num_speculative_tokens_per_batch_size":[[1,8,4],[9,64,2]]' in raw
    # the dataclass itself is unchanged (tuples)
    assert sc.num_speculative_tokens_per_batch_size == ((1, 8, 4), (9, 64, 2))


def test_engine_config_as_dict_embeds_speculative_json() -> None:
    c = EngineConfig(max_num_seqs=4, speculative=SpeculativeConfig(method="mtp", num_speculative_tokens=1))
    d = c.as_dict()
    assert d["max_num_seqs"] == 4
    assert d["speculative"] == {"method": "mtp", "num_speculative_tokens": 1}
    assert EngineConfig().as_dict()["speculative"] is None


# ---------------------------------------------------------------- engine prefix


def test_module_launcher(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOVA_ENGINE_PYTHON", raising=False)
    engine = EngineSpec(python="/opt/vllm/bin/python")
    assert engine_prefix(engine, MODEL) == [
        "/opt/vllm/bin/python",
        "-m",
        API_SERVER_MODULE,
        "--model",
        "/models/tiny",
    ]
    assert API_SERVER_MODULE == "vllm.entrypoints.openai.api_server"


def test_module_launcher_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOVA_ENGINE_PYTHON", "/env/python")
    assert engine_prefix(EngineSpec(python="/spec/python"), MODEL)[0] == "/env/python"
    assert engine_prefix(EngineSpec(), MODEL)[:3] == ["/env/python", "-m", API_SERVER_MODULE]


def test_command_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOVA_ENGINE_PYTHON", "/env/python")  # ignored when a command is given
    engine = EngineSpec(command=["vllm", "serve"])
    assert engine_prefix(engine, MODEL) == ["vllm", "serve", "/models/tiny"]


def test_no_engine_is_an_engine_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOVA_ENGINE_PYTHON", raising=False)
    with pytest.raises(EngineError, match="NOVA_ENGINE_PYTHON"):
        engine_prefix(EngineSpec(), MODEL)
    with pytest.raises(EngineError):
        build_launch(EngineSpec(), MODEL, EngineConfig(), port=8000, api_key=SECRET)


def test_served_name_defaults_to_path() -> None:
    assert served_name(MODEL) == "tiny"
    assert served_name(ModelSpec(path="org/model")) == "org/model"


# ---------------------------------------------------------------- build_launch


def full_config() -> EngineConfig:
    return EngineConfig(
        max_num_seqs=16,
        enable_prefix_caching=False,
        speculative=SpeculativeConfig(method="ngram", num_speculative_tokens=3, prompt_lookup_max=4),
    )


def test_build_launch_module_argv(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOVA_ENGINE_PYTHON", raising=False)
    engine = EngineSpec(
        python="/py", host="127.0.0.2", extra_args=["--enforce-eager", "--load-format", "dummy"]
    )
    plan = build_launch(engine, MODEL, full_config(), port=8123, api_key=SECRET, key_file=Path("/k/key.yaml"))
    assert isinstance(plan.argv, tuple)
    assert list(plan.argv) == [
        "/py",
        "-m",
        API_SERVER_MODULE,
        "--model",
        "/models/tiny",
        "--served-model-name",
        "tiny",
        "--max-num-seqs",
        "16",
        "--no-enable-prefix-caching",
        "--speculative-config",
        '{"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":4}',
        "--enforce-eager",
        "--load-format",
        "dummy",
        "--config",
        "/k/key.yaml",
        "--host",
        "127.0.0.2",
        "--port",
        "8123",
    ]
    assert plan.host == "127.0.0.2" and plan.port == 8123


def test_build_launch_command_argv() -> None:
    engine = EngineSpec(command=["vllm", "serve"])
    plan = build_launch(
        engine, ModelSpec(path="org/m"), EngineConfig(max_num_seqs=2), port=9000, api_key=SECRET
    )
    assert list(plan.argv[:3]) == ["vllm", "serve", "org/m"]
    assert "--model" not in plan.argv
    assert flag_value(plan.argv, "--served-model-name") == "org/m"
    assert list(plan.argv[-4:]) == ["--host", "127.0.0.1", "--port", "9000"]


def test_api_key_only_in_its_file() -> None:
    engine = EngineSpec(python="/py", env={"HF_HOME": "/cache"})
    plan = build_launch(engine, MODEL, full_config(), port=8000, api_key=SECRET)
    # neither in argv (ps) nor in the environment (vLLM hashes it into its compile cache's key)
    assert plan.api_key == SECRET and "VLLM_API_KEY" not in plan.env
    assert yaml.safe_load(plan.key_config()) == {"api-key": SECRET}  # what vLLM's --config reads
    assert flag_value(plan.argv, "--config") == str(plan.key_file)
    assert plan.env["HF_HOME"] == "/cache"
    assert not any(SECRET in a for a in plan.argv)
    assert "--api-key" not in plan.argv and "--config" not in deployable_argv(plan.argv)
    assert engine.env == {"HF_HOME": "/cache"}  # the spec's mapping is not mutated
    other = build_launch(engine, MODEL, full_config(), port=8000, api_key=SECRET)
    assert other.key_file != plan.key_file  # a new file a launch


def test_new_api_keys_never_read_as_a_flag() -> None:
    # vLLM turns --config entries into argv; a key starting with "-" made the server exit with code 2
    keys = {new_api_key() for _ in range(2000)}
    assert len(keys) == 2000 and all(re.fullmatch(r"[0-9a-f]{48}", k) for k in keys)
    with pytest.raises(EngineError, match="api_key: a key that starts with '-'"):
        build_launch(EngineSpec(python="/py"), MODEL, EngineConfig(), port=8000, api_key="-Abc_def")


def test_gpus_set_cuda_visible_devices() -> None:
    engine = EngineSpec(python="/py")
    plan = build_launch(engine, MODEL, EngineConfig(), port=8000, api_key=SECRET, gpus=(2, 3))
    assert plan.env["CUDA_VISIBLE_DEVICES"] == "2,3"
    plan = build_launch(engine, MODEL, EngineConfig(), port=8000, api_key=SECRET, gpus=(0,))
    assert plan.env["CUDA_VISIBLE_DEVICES"] == "0"


def test_no_gpus_leaves_cuda_visible_devices_alone() -> None:
    plan = build_launch(EngineSpec(python="/py"), MODEL, EngineConfig(), port=8000, api_key=SECRET)
    assert "CUDA_VISIBLE_DEVICES" not in plan.env


def test_sleep_mode_registers_pinned_memory_with_the_servers_cores() -> None:
    """A sleep copies the weights into pinned host memory; the first one allocates it, and PyTorch's
    cudaHostRegister path with several threads allocated 15.3 GiB in 1.9 s instead of 6.8 s."""
    plain = build_launch(EngineSpec(python="/py"), MODEL, EngineConfig(), port=8000, api_key=SECRET)
    assert "PYTORCH_CUDA_ALLOC_CONF" not in plain.env and "VLLM_SERVER_DEV_MODE" not in plain.env
    engine = EngineSpec(python="/py", cpus=[0, 1, 2, 3])
    plan = build_launch(engine, MODEL, EngineConfig(), port=8000, api_key=SECRET, sleep_mode=True)
    assert plan.env["VLLM_SERVER_DEV_MODE"] == "1"
    assert plan.env["PYTORCH_CUDA_ALLOC_CONF"] == (
        "pinned_use_cuda_host_register:True,pinned_num_register_threads:4"
    )
    # PyTorch takes a power of two only: 12 cores register with 8 threads, 64 with 16
    for cpus, threads in ((12, 8), (64, 16), (1, 1), (3, 2)):
        engine = EngineSpec(python="/py", cpus=list(range(cpus)))
        plan = build_launch(engine, MODEL, EngineConfig(), port=8000, api_key=SECRET, sleep_mode=True)
        assert plan.env["PYTORCH_CUDA_ALLOC_CONF"].endswith(f"pinned_num_register_threads:{threads}")
    # the spec's own allocator settings are kept; its own pinning choice wins
    engine = EngineSpec(python="/py", env={"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:512"})
    plan = build_launch(engine, MODEL, EngineConfig(), port=8000, api_key=SECRET, sleep_mode=True)
    conf = plan.env["PYTORCH_CUDA_ALLOC_CONF"]
    assert conf.startswith("max_split_size_mb:512,pinned_use_cuda_host_register:True,")
    assert int(conf.rsplit(":", 1)[1]) in (1, 2, 4, 8, 16)
    engine = EngineSpec(python="/py", env={"PYTORCH_CUDA_ALLOC_CONF": "pinned_use_cuda_host_register:False"})
    plan = build_launch(engine, MODEL, EngineConfig(), port=8000, api_key=SECRET, sleep_mode=True)
    assert plan.env["PYTORCH_CUDA_ALLOC_CONF"] == "pinned_use_cuda_host_register:False"


# ---------------------------------------------------------------- deployable_argv


def test_deployable_argv_drops_host_port_and_the_key_file_only() -> None:
    plan = build_launch(EngineSpec(python="/py"), MODEL, full_config(), port=8123, api_key=SECRET)
    dep = deployable_argv(plan.argv)
    assert "--host" not in dep and "--port" not in dep and "--config" not in dep
    assert "8123" not in dep and "127.0.0.1" not in dep
    assert dep == list(plan.argv[:-6])
    assert json.loads(flag_value(dep, "--speculative-config"))["prompt_lookup_max"] == 4


def test_deployable_argv_keeps_values_that_look_like_ports() -> None:
    argv = ["vllm", "serve", "m", "--max-num-seqs", "8000", "--port", "8000", "--host", "h", "--x"]
    assert deployable_argv(argv) == ["vllm", "serve", "m", "--max-num-seqs", "8000", "--x"]
