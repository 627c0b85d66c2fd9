"""How fast can nova's load generator go? Streams from the stand-in server with zero delays.

The stand-in (tests/support/standin.py) runs in its own process, so the client's CPU time is its own
and the two do not share a GIL. Each level is nova's closed loop (``run_level``) at that concurrency:
the figures are the most streamed tokens/s and requests/s one nova client process sustains, and the
client's CPU seconds per 1k streamed tokens. When "server CPU" nears 100 %, the stand-in, not the
client, is the limit, and the client's figures are a lower bound.

    .venv/bin/python benchmarks/client_overhead.py [--output-len 128] [--concurrency 1 16 64]

Figures only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from nova_search.loadgen.client import Target  # noqa: E402
from nova_search.loadgen.runner import LevelPlan, run_level  # noqa: E402
from nova_search.loadgen.workload import Prompt  # noqa: E402
from nova_search.metrics import summarize  # noqa: E402

REQUESTS = {1: 300, 16: 1000, 64: 2000}


def proc_cpu_s(pid: int) -> float | None:
    """utime + stime of a process, from /proc (Linux); None elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def prompts(n: int, input_len: int, output_len: int, seed: int) -> tuple[Prompt, ...]:
    return tuple(
        Prompt(tuple(3 + (seed * 7919 + i * 31 + j) % 30_000 for j in range(input_len)), output_len)
        for i in range(n)
    )


def start_standin(tokens_per_chunk: int) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.support.standin",
            "--port",
            "0",
            "--tokens-per-chunk",
            str(tokens_per_chunk),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("standin listening on "):
        proc.kill()
        raise SystemExit(f"the stand-in did not start: {line!r}")
    return proc, line.split()[-1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64])
    p.add_argument(
        "--requests",
        type=int,
        default=None,
        help="requests per level (default: 300 / 1000 / 2000 for 1 / 16 / 64)",
    )
    p.add_argument("--output-len", type=int, default=128)
    p.add_argument("--input-len", type=int, default=32)
    p.add_argument("--tokens-per-chunk", type=int, default=1)
    args = p.parse_args()

    proc, base_url = start_standin(args.tokens_per_chunk)
    target = Target(base_url=base_url, model="standin")
    rows = []
    try:
        for i, c in enumerate(args.concurrency):
            n = args.requests or REQUESTS.get(c, max(300, 32 * c))
            # warm the code paths and the stand-in, then measure on fresh connections
            run_level(
                target,
                LevelPlan(
                    concurrency=c,
                    warmup=(),
                    prompts=prompts(max(2 * c, 20), args.input_len, args.output_len, seed=2 * i),
                ),
            )
            srv0, t0 = proc_cpu_s(proc.pid), time.perf_counter()
            run = run_level(
                target,
                LevelPlan(
                    concurrency=c,
                    warmup=(),
                    prompts=prompts(n, args.input_len, args.output_len, seed=2 * i + 1),
                ),
            )
            wall = time.perf_counter() - t0
            srv1 = proc_cpu_s(proc.pid)
            res = summarize(run)
            srv_share = (srv1 - srv0) / wall if srv0 is not None and srv1 is not None else None
            rows.append((c, res, run.client_cpu_s, srv_share))
    finally:
        proc.terminate()
        proc.wait(timeout=10)

    print(
        f"nova load generator vs the stand-in (zero delays), {args.output_len} output tokens a "
        f"request, {args.tokens_per_chunk} token(s) a chunk, {args.input_len} prompt tokens"
    )
    print(f"python {platform.python_version()}, {os.cpu_count()} CPUs, {platform.machine()}")
    print()
    head = (
        f"{'conc':>4}  {'reqs':>5}  {'errors':>6}  {'window s':>8}  {'tokens/s':>9}  {'req/s':>7}"
        f"  {'client CPU s/1k tok':>19}  {'client CPU':>10}  {'server CPU':>10}"
        f"  {'TTFT p50 ms':>11}  {'ITL p50 ms':>10}"
    )
    print(head)
    print("-" * len(head))
    for c, res, cpu_s, srv_share in rows:
        per_1k = cpu_s / (res.output_tokens / 1000) if res.output_tokens else float("nan")
        client_share = f"{res.client_cpu_share:.0%}" if res.client_cpu_share is not None else "n/a"
        server_share = f"{srv_share:.0%}" if srv_share is not None else "n/a"
        print(
            f"{c:>4}  {res.requests:>5}  {res.errors:>6}  {res.duration_s:>8.2f}"
            f"  {res.output_throughput:>9.0f}  {res.request_throughput:>7.1f}  {per_1k:>19.4f}"
            f"  {client_share:>10}  {server_share:>10}"
            f"  {res.ttft_p50_ms or float('nan'):>11.2f}  {res.itl_p50_ms or float('nan'):>10.3f}"
        )
    print()
    print("client CPU: the client process's CPU time / the window (100 % = one core busy);")
    print("server CPU: the stand-in process's, likewise. Near 100 %, that side is the limit.")


if __name__ == "__main__":
    main()
