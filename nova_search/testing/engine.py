"""The real vLLM (CPU build, tiny model) the read-only tests share, and the benchmarks start the same way."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from nova_search.engine.server import Server


@contextmanager
def pinned_tiny_vllm(engine_python: str, model: Path, log: Path) -> Iterator[Server]:
    """A vLLM server for the tiny model on core 0 (its OpenMP threads too), started with nova's own
    launcher: loopback, fresh API key, own process group, stopped on exit. Clients belong on core 1."""
    from nova_search.engine.command import build_launch
    from nova_search.engine.server import free_port
    from nova_search.knobs import EngineConfig
    from nova_search.spec import EngineSpec, ModelSpec

    engine = EngineSpec(
        python=engine_python,
        device="cpu",
        cpus=[0],
        env={"VLLM_CPU_OMP_THREADS_BIND": "0"},
        extra_args=["--enforce-eager", "--load-format", "dummy"],
    )
    spec = ModelSpec(path=str(model), served_name="tiny")
    config = EngineConfig(max_model_len=2048, gpu_memory_utilization=0.15, max_num_seqs=16)
    plan = build_launch(engine, spec, config, port=free_port(), api_key=os.urandom(12).hex())
    with Server(plan, log, boot_timeout_s=300) as server:
        yield server
