"""Shared fixtures. Real parts only: the CPU vLLM engine (NOVA_ENGINE_PYTHON, set by scripts/test.sh),
the tiny local model, PostgreSQL on 127.0.0.1. A missing dependency fails loudly; nothing is skipped."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.standin import StandinOptions, StandinServer

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def engine_python() -> str:
    python = os.environ.get("NOVA_ENGINE_PYTHON")
    if not python or not Path(python).exists():
        pytest.fail(
            "NOVA_ENGINE_PYTHON must point at an interpreter with vLLM (CPU build); "
            "run the suite with `bash scripts/test.sh`, which sets it up"
        )
    return python


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from nova_search.tinymodel import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("models") / "tiny")


def vllm_processes() -> set[str]:
    """Live (non-zombie) vLLM processes on this machine, API servers and engine cores, as
    "PID ARGS" lines. Compare the set before and after a test to find what it left behind."""
    out = subprocess.run(["ps", "-eo", "pid=,stat=,args="], capture_output=True, text=True, check=True).stdout
    found = set()
    for line in out.splitlines():
        pid, stat, args = (line.split(None, 2) + ["", ""])[:3]
        if ("vllm.entrypoints" in args or "VLLM::" in args) and not stat.startswith("Z"):
            found.add(f"{pid} {args}")
    return found


def tiny_spec(model: Path, **changes: object) -> dict:
    """studies/tiny-cpu.yaml pointed at ``model``, smaller and faster, with top-level changes."""
    import yaml

    raw = yaml.safe_load((REPO / "studies" / "tiny-cpu.yaml").read_text())
    raw["model"]["path"] = str(model)
    raw["space"]["speculative"]["drafters"]["draft_model"] = str(model)
    raw["sweep"] = {
        "concurrency": [1, 2],
        "warmup_requests": 1,
        "requests": 6,
        "request_timeout_s": 120,
        "client_cpus": [1],
    }
    raw["workload"] = {"input_len": 64, "output_len": 24, "seed": 0}
    raw["objectives"] = [
        {"metric": "output_throughput", "direction": "maximize", "at": "best"},
        {"metric": "ttft_p99_ms", "direction": "minimize", "at": 2},
    ]
    raw["constraints"] = ["ttft_p99_ms <= 60000 at concurrency 2"]
    raw.update(changes)
    return raw


@pytest.fixture
def standin() -> Iterator[Callable[..., StandinServer]]:
    """A factory: ``standin(tokens_per_chunk=3, ttft_s=0.05)`` starts a stand-in server on a free
    loopback port; every server it started is stopped when the test ends."""
    servers: list[StandinServer] = []

    def start(**options: object) -> StandinServer:
        server = StandinServer(StandinOptions(**options)).start()  # type: ignore[arg-type]
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture(scope="session")
def shared_vllm(engine_python: str, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory):
    """One real vLLM (CPU, tiny model) for every test that only reads from it, started with nova's own
    launcher: loopback, fresh API key, own process group, torn down at the end of the session."""
    from tests.support.engine import pinned_tiny_vllm

    os.environ.setdefault("NOVA_ENGINE_PYTHON", engine_python)
    log = tmp_path_factory.mktemp("shared-vllm") / "server.log"
    with pinned_tiny_vllm(engine_python, tiny_model, log) as server:
        yield server
