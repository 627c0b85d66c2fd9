"""The CUDA-graph size nova sets on a GPU trial (engine.cuda_graphs: sweep) is a flag vLLM itself takes:
the argv nova builds for a sampled GPU configuration, parsed by vLLM's own server parser in the engine
interpreter, gives vLLM's EngineArgs the sweep's size and every other knob as nova set it. (The boots
it saves are measured on the H200: benchmarks/results/boot-times-h200/.)"""

from __future__ import annotations

import json
import subprocess

import optuna
import pytest

from nova_search.engine.command import build_launch
from nova_search.spec import parse_spec
from nova_search.testing.specs import minimal_spec_dict
from nova_search.trial.run import choose_config

pytestmark = pytest.mark.engine

PARSE = """
import json, sys
try:
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
except ImportError:  # older vLLM
    from vllm.entrypoints.openai.cli_args import make_arg_parser
from vllm.engine.arg_utils import EngineArgs
from vllm.utils.argparse_utils import FlexibleArgumentParser
args = make_arg_parser(FlexibleArgumentParser()).parse_args(json.loads(sys.argv[1]))
ea = EngineArgs.from_cli_args(args)
print(json.dumps({"api_key": args.api_key, **{k: getattr(ea, k) for k in json.loads(sys.argv[2])}}))
"""


def test_vllm_takes_the_sweeps_graph_size_from_novas_argv(engine_python: str, tiny_model, tmp_path) -> None:
    raw = minimal_spec_dict(
        model={"path": str(tiny_model), "served_name": "tiny"},
        sweep={"concurrency": [1, 8, 48], "requests": 2},
        space={"max_num_seqs": {"choices": [16, 256]}, "max_num_batched_tokens": 2048},
    )
    raw["engine"] = {"python": engine_python, "device": "cuda"}
    spec = parse_spec(raw)
    trial = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=3)).ask()
    config = choose_config(trial, spec)
    assert config.max_cudagraph_capture_size == 48
    key_file = tmp_path / "key.yaml"
    plan = build_launch(spec.engine, spec.model, config, port=8000, api_key="unused", key_file=key_file)
    key_file.write_text(plan.key_config())  # as Server.start writes it: vLLM reads it through --config
    server_args = list(plan.argv[plan.argv.index("--model") :])
    keys = ["max_cudagraph_capture_size", "max_num_seqs", "max_num_batched_tokens"]
    r = subprocess.run(
        [engine_python, "-c", PARSE, json.dumps(server_args), json.dumps(keys)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got == {
        "api_key": ["unused"],  # the key from nova's file, not from argv or the environment
        "max_cudagraph_capture_size": 48,
        "max_num_seqs": config.max_num_seqs,
        "max_num_batched_tokens": 2048,
    }
