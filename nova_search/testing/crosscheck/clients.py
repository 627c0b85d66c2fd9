"""The two clients' command lines and processes: vLLM's ``vllm bench serve`` in a worker of the engine's
interpreter (``peer_client``), nova's ``bench`` (``nova_run``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from nova_search.testing import REPO
from nova_search.testing.crosscheck.busy_cores import proc_cpu_s
from nova_search.testing.crosscheck.plan import CrossCheckPlan

WORKER = Path(__file__).with_name("vllm_bench_worker.py")


def vllm_bench_args(
    base_url: str,
    model: str,
    tokenizer: str | Path,
    *,
    input_len: int,
    output_len: int,
    num_requests: int,
    concurrency: int,
    warmups: int,
    seed: int,
) -> list[str]:
    """``vllm bench serve`` arguments: the random dataset at fixed lengths (range ratio 0), exact
    outputs (``--ignore-eos``), greedy, closed loop at ``concurrency``, ``warmups`` warmup requests
    and no extra ready-check request."""
    return [
        "--backend",
        "vllm",
        "--base-url",
        base_url,
        "--model",
        model,
        "--tokenizer",
        str(tokenizer),
        "--dataset-name",
        "random",
        "--random-input-len",
        str(input_len),
        "--random-output-len",
        str(output_len),
        "--random-range-ratio",
        "0",
        "--num-prompts",
        str(num_requests),
        "--max-concurrency",
        str(concurrency),
        "--num-warmups",
        str(warmups),
        "--ready-check-timeout-sec",
        "0",
        "--ignore-eos",
        "--temperature",
        "0",
        "--seed",
        str(seed),
        "--disable-tqdm",
    ]


def peer_args(plan: CrossCheckPlan, base_url: str, model: str, tokenizer: str | Path, seed: int) -> list[str]:
    return vllm_bench_args(
        base_url,
        model,
        tokenizer,
        input_len=plan.input_len,
        output_len=plan.output_len,
        num_requests=plan.num_requests,
        concurrency=plan.concurrency,
        warmups=plan.warmups,
        seed=seed,
    ) + ["--save-detailed"]  # per-request start times and TTFTs in the result (peer_requests)


def nova_argv(
    plan: CrossCheckPlan, base_url: str, model: str, seed: int, requests_out: Path | None = None
) -> list[str]:
    return [
        "taskset",
        "-c",
        plan.client_cpus,
        sys.executable,
        "-m",
        "nova_search",
        "bench",
        "--url",
        base_url,
        "--model",
        model,
        "--concurrency",
        str(plan.concurrency),
        "--input-len",
        str(plan.input_len),
        "--output-len",
        str(plan.output_len),
        "--num-requests",
        str(plan.num_requests),
        "--warmup",
        str(plan.warmups),
        "--vocab-size",
        str(plan.vocab_size),
        "--seed",
        str(seed),
        "--cpus",
        plan.client_cpus,
        "--processes",
        str(plan.processes) if plan.processes is not None else "auto",
        # connections as vLLM's client has them: those its warmup opened, the rest opened in the window
        "--preconnect" if plan.preconnect else "--no-preconnect",
        "--prompt-format",
        plan.prompt_format,
        *(["--tokenizer", plan.tokenizer] if plan.tokenizer else []),
        *(["--requests-out", str(requests_out)] if requests_out is not None else []),
        "--format",
        "json",
    ]


class PeerClient:
    """A running ``vllm bench serve`` worker (vllm_bench_worker.py beside this module), pinned."""

    def __init__(self, proc: subprocess.Popen[str], log: Path) -> None:
        self._proc = proc
        self.log = log

    def cpu_s(self) -> float:
        """The worker's CPU seconds so far (``taskset`` execs it: same pid)."""
        return proc_cpu_s(self._proc.pid)

    def run(self, args: Sequence[str], timeout_s: float = 300.0, env: dict[str, str] | None = None) -> dict:
        """One ``vllm bench serve`` run; ``env`` is set in the worker first (a new server's API key)."""
        proc = self._proc
        assert proc.stdin is not None and proc.stdout is not None
        request = {"args": list(args), "env": env} if env else list(args)
        proc.stdin.write(json.dumps(request) + "\n")
        proc.stdin.flush()
        while True:  # vLLM's benchmark code prints INFO lines on stdout on a GPU: skip what is not JSON
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError(f"vllm bench worker exited ({proc.poll()}); see {self.log}")
            if line.lstrip().startswith("{"):
                break
        answer = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"vllm bench serve failed: {answer['error']}\n{answer.get('traceback', '')}")
        return answer


@contextmanager
def peer_client(engine_python: str, cpus: str, api_key: str | None, log: Path) -> Iterator[PeerClient]:
    """Start the vLLM benchmark worker pinned to ``cpus``; it reads the API key from OPENAI_API_KEY."""
    env = dict(os.environ)
    if api_key:
        env["OPENAI_API_KEY"] = api_key
    with open(log, "w") as err:
        proc = subprocess.Popen(
            ["taskset", "-c", cpus, engine_python, str(WORKER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env=env,
        )
        try:
            assert proc.stdout is not None
            ready = proc.stdout.readline()
            if not ready:
                raise RuntimeError(f"vllm bench worker did not start; see {log}")
            yield PeerClient(proc, log)
        finally:
            if proc.stdin is not None:
                proc.stdin.close()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def nova_run(
    plan: CrossCheckPlan,
    base_url: str,
    model: str,
    api_key: str | None,
    seed: int,
    timeout_s: float = 600.0,
    requests_out: Path | None = None,
) -> dict:
    """``nova-search bench --format json`` at one level, pinned; its one LevelResult as a dict (every
    measured request also in ``requests_out``, as ``bench --requests-out`` writes them)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    if api_key:
        env["NOVA_BENCH_API_KEY"] = api_key
    r = subprocess.run(
        nova_argv(plan, base_url, model, seed, requests_out),
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    if r.returncode != 0:
        raise RuntimeError(f"nova-search bench failed ({r.returncode}): {r.stderr[-2000:]}")
    (level,) = json.loads(r.stdout)["levels"]
    return level
