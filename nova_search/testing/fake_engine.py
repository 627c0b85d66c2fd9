"""A fast stand-in *engine* for coordination tests and benchmarks: launched by nova-search exactly as vLLM is
(``engine.command: [python, -m, nova_search.testing.fake_engine]``), it takes vLLM's argv (the model, then
flags), answers on --host/--port with the API key from its --config file (as vLLM reads it), and
serves the stand-in's OpenAI streaming API. Unknown vLLM flags are accepted and ignored.

Environment knobs: FAKE_ENGINE_BOOT_S (seconds before it listens, default 0.2), FAKE_ENGINE_TTFT_S
(default 0.005), FAKE_ENGINE_ITL_S (default 0.002), FAKE_ENGINE_KNEE=N (a known saturation point: past N
requests in flight every delay stretches in proportion), FAKE_ENGINE_ERROR_EVERY=N (HTTP 500 for every
Nth request), FAKE_ENGINE_CHILD=1 (also spawn a child process in the same group, like vLLM's
engine core, to prove group teardown), FAKE_ENGINE_REFUSE=FLAG (exit 1 at boot, with an error in its
log, when FLAG is in its argv: a configuration the engine cannot run), FAKE_ENGINE_SLOW_WITH=FLAG (4
times the delays when FLAG is in its argv: a configuration that is plainly worse), FAKE_ENGINE_FAST_WITH=FLAG
(a quarter of the delays: plainly better),
FAKE_ENGINE_PRINT_ENV=A,B (print ``A=value`` of each at start, as an engine that logs its
environment does), FAKE_ENGINE_DIE=1 (exit 1 at boot after that, as an engine that cannot start),
FAKE_ENGINE_DETACH=FILE (start a child that leaves the process group with setsid, as a daemonising
helper does, and write its pid to FILE), FAKE_ENGINE_LOG_MB=N (print N MiB of log lines at start),
FAKE_ENGINE_RECORD=FILE (append a JSON line when it starts and when SIGTERM stops it: its pid, the
time, its port, the CUDA_VISIBLE_DEVICES it was given and its --tensor-parallel-size; ``engine_records`` reads
them back as one ``EngineLife`` per server; a line too for each sleep and wake). With
``--enable-sleep-mode`` and VLLM_SERVER_DEV_MODE=1 it serves vLLM's sleep-mode endpoints, and answers
completions with 503 while asleep.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from nova_search.testing.standin import StandinOptions, serve


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="fake_engine")
    p.add_argument("model")
    p.add_argument("--served-model-name", default=None)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--tensor-parallel-size", type=int, default=1)
    p.add_argument("--config", default=None)
    args, _ignored = p.parse_known_args(argv)
    given = sys.argv[1:] if argv is None else argv
    record = os.environ.get("FAKE_ENGINE_RECORD") or None
    if record:
        _record(record, "start", args.port, args.tensor_parallel_size)

        def stopped(signum: int, frame: object) -> None:
            _record(record, "stop", args.port, args.tensor_parallel_size)
            os._exit(0)

        signal.signal(signal.SIGTERM, stopped)
    refuse = os.environ.get("FAKE_ENGINE_REFUSE") or None
    if refuse and refuse in given:
        print(f"ValueError: fake engine refuses {refuse}", file=sys.stderr, flush=True)
        sys.exit(1)
    # as vLLM 0.26 does, the key read from --config among the arguments it logs at start-up
    print(f"non-default args: {{'port': {args.port}, 'api_key': [{_api_key(args.config)!r}]}}", flush=True)
    for name in filter(None, (os.environ.get("FAKE_ENGINE_PRINT_ENV") or "").split(",")):
        print(f"environment: {name}={os.environ.get(name)}", flush=True)
    detach = os.environ.get("FAKE_ENGINE_DETACH") or None
    if detach:
        child = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(3600)"], start_new_session=True
        )
        Path(detach).write_text(str(child.pid))
    megabytes = int(os.environ.get("FAKE_ENGINE_LOG_MB") or "0")
    line = "INFO chatty engine line " + "x" * 999 + "\n"
    for _ in range(megabytes * 1024):
        sys.stdout.write(line)
    sys.stdout.flush()
    if os.environ.get("FAKE_ENGINE_DIE") == "1":
        print("RuntimeError: fake engine cannot start", flush=True)
        sys.exit(1)
    time.sleep(float(os.environ.get("FAKE_ENGINE_BOOT_S") or "0.2"))
    if os.environ.get("FAKE_ENGINE_CHILD") == "1":
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    slow = os.environ.get("FAKE_ENGINE_SLOW_WITH") or None
    factor = 4.0 if slow and slow in given else 1.0
    fast = os.environ.get("FAKE_ENGINE_FAST_WITH") or None
    factor = 0.25 if fast and fast in given else factor
    sleep_mode = "--enable-sleep-mode" in given and os.environ.get("VLLM_SERVER_DEV_MODE") == "1"

    def on_sleep(event: str) -> None:
        if record:
            _record(record, event, args.port, args.tensor_parallel_size)

    options = StandinOptions(
        sleep_mode=sleep_mode,
        on_sleep=on_sleep,
        model=args.served_model_name or args.model,
        api_key=_api_key(args.config),
        ttft_s=float(os.environ.get("FAKE_ENGINE_TTFT_S") or "0.005") * factor,
        token_shift=1 if _synthetic_acceptance(given) else 0,
        itl_s=float(os.environ.get("FAKE_ENGINE_ITL_S") or "0.002") * factor,
        knee_in_flight=int(os.environ.get("FAKE_ENGINE_KNEE") or "0"),
        error_every=int(os.environ.get("FAKE_ENGINE_ERROR_EVERY") or "0"),
    )
    asyncio.run(serve(options, args.host, args.port, False))  # until SIGTERM or SIGINT
    if record:
        _record(record, "stop", args.port, args.tensor_parallel_size)


def _synthetic_acceptance(argv: list[str]) -> bool:
    """Whether ``--speculative-config`` asks for vLLM's synthetic rejection sampler: it accepts drafted
    tokens by the chosen profile, not by the target's choice, so the greedy output differs (on a GPU,
    with random drafter weights, it diverges within a few tokens); the stand-in's output differs too."""
    for i, a in enumerate(argv):
        value = argv[i + 1] if a == "--speculative-config" and i + 1 < len(argv) else None
        if a.startswith("--speculative-config="):
            value = a.split("=", 1)[1]
        if value is not None:
            try:
                return json.loads(value).get("rejection_sample_method") == "synthetic"
            except (ValueError, AttributeError):
                return False
    return False


def _api_key(config: str | None) -> str | None:
    """The API key as vLLM takes it: ``api-key`` in the --config YAML, else VLLM_API_KEY."""
    if config:
        import yaml

        return str(yaml.safe_load(Path(config).read_text())["api-key"])
    return os.environ.get("VLLM_API_KEY")


def _record(path: str, event: str, port: int, tp: int) -> None:
    row = {
        "event": event,
        "pid": os.getpid(),
        "port": port,
        "t": time.time(),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "tensor_parallel_size": tp,
    }
    with open(path, "a") as f:  # one short write a line: lines of several servers never interleave
        f.write(json.dumps(row) + "\n")


@dataclass(frozen=True)
class EngineLife:
    """One stand-in server as FAKE_ENGINE_RECORD saw it: the GPUs it was given, its TP, when it ran
    (``stop`` None: it never got SIGTERM, e.g. killed)."""

    pid: int
    port: int
    gpus: tuple[int, ...] | None
    tensor_parallel_size: int
    start: float
    stop: float | None


def engine_records(path: Path) -> list[EngineLife]:
    rows = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    stops = {r["pid"]: r["t"] for r in rows if r["event"] == "stop"}
    out = []
    for r in rows:
        if r["event"] == "start":
            cuda = r["cuda_visible_devices"]
            gpus = tuple(int(g) for g in cuda.split(",")) if cuda is not None else None
            life = EngineLife(
                r["pid"], r["port"], gpus, r["tensor_parallel_size"], r["t"], stops.get(r["pid"])
            )
            out.append(life)
    return out


if __name__ == "__main__":
    main()
