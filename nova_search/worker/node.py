"""One node, many workers: ``nova-search node`` splits the node's GPUs into groups and runs one
``nova-search worker`` process per group on one study, until they all end.

Each worker is an ordinary worker (its own heartbeats, budget lock, slots; ``worker``), so a node
behaves exactly as that many workers started by hand. The launcher only supervises them:

- each worker writes its output to a log file of its own (``worker-gpus-0,1.log`` in the log
  folder), which the launcher follows, each line prefixed with the worker's GPUs: a worker whose
  launcher has gone keeps a place to write, so it can still record its trial;
- SIGINT or SIGTERM to the launcher is passed on as one SIGTERM to every worker (each stops its
  servers and records its trial FAIL ``interrupted``); a worker still alive after the grace period is
  killed, and its server's guard process (``engine.reaper``) takes the server down with it;
- the workers are in sessions of their own (a terminal's Ctrl-C reaches the launcher only, which
  passes it on once) and get SIGTERM from the kernel if the launcher dies (``PR_SET_PDEATHSIG``), so a
  launcher killed with SIGKILL leaves no worker behind.

Exit code: 130 when interrupted; else 0 when every worker exited 0, else the first non-zero one.
"""

from __future__ import annotations

import ctypes
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from nova_search.errors import SpecError
from nova_search.search.placement import gpu_set

#: prctl(2): deliver a signal to this process when its parent thread dies
_PR_SET_PDEATHSIG = 1
INTERRUPTED = 130


def worker_groups(gpus: Sequence[int], per_worker: int) -> list[tuple[int, ...]]:
    """The node's GPUs split into one group per worker, in order; raises SpecError naming the flags
    when they do not split evenly or a GPU is listed twice."""
    gpus = gpu_set(gpus)
    listed = ",".join(map(str, gpus))
    if not gpus:
        raise SpecError("--gpus: give the node's GPUs, e.g. 0,1,2,3")
    if per_worker < 1 or len(gpus) % per_worker:
        raise SpecError(
            f"--gpus-per-worker {per_worker}: must divide the {len(gpus)} GPUs of --gpus {listed} "
            f"(e.g. {' or '.join(str(n) for n in range(1, len(gpus) + 1) if len(gpus) % n == 0)})"
        )
    return [gpus[i : i + per_worker] for i in range(0, len(gpus), per_worker)]


@dataclass(frozen=True)
class NodeWorker:
    """One worker of the node: its GPU group and its argv."""

    gpus: tuple[int, ...]
    argv: tuple[str, ...]

    @property
    def label(self) -> str:
        return f"gpus {','.join(map(str, self.gpus))}"


def worker_argv(study: str, gpus: tuple[int, ...], options: Sequence[str]) -> tuple[str, ...]:
    """``nova-search worker STUDY --gpus G`` with the node's other worker options."""
    listed = ",".join(map(str, gpus))
    return (sys.executable, "-m", "nova_search", "worker", study, "--gpus", listed, *options)


def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM when the launcher dies (Linux; elsewhere a no-op)."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class _Follow:
    """Copies the new complete lines of the workers' log files to ``out``, each with its prefix."""

    def __init__(self, files: Sequence[tuple[str, Path]], out: TextIO) -> None:
        self.files = [(prefix, path, path.stat().st_size if path.exists() else 0) for prefix, path in files]
        self.out = out
        self.partial = ["" for _ in files]

    def poll(self, final: bool = False) -> None:
        for i, (prefix, path, offset) in enumerate(self.files):
            with path.open("rb") as f:
                f.seek(offset)
                data = f.read()
            self.files[i] = (prefix, path, offset + len(data))
            text = self.partial[i] + data.decode("utf-8", "replace")
            lines = text.split("\n")
            self.partial[i] = "" if final else lines.pop()
            for line in lines:
                if line or not final:
                    self.out.write(f"[{prefix}] {line}\n")
        self.out.flush()


def run_node(
    workers: Sequence[NodeWorker],
    log_dir: Path,
    *,
    env: Mapping[str, str] | None = None,
    grace_s: float = 60.0,
    out: TextIO = sys.stdout,
) -> int:
    """Run the workers (with environment ``env``, else the launcher's; output to their log files in
    ``log_dir``) until they all end, or until SIGINT/SIGTERM (then stop them: see the module
    docstring). Returns the node's exit code. Call from the main thread."""
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    log_dir.mkdir(parents=True, exist_ok=True)
    logs = [log_dir / f"worker-gpus-{','.join(map(str, w.gpus))}.log" for w in workers]
    follow = _Follow([(w.label, path) for w, path in zip(workers, logs, strict=True)], out)
    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for w, path in zip(workers, logs, strict=True):
            with path.open("ab") as log:
                procs.append(
                    subprocess.Popen(
                        w.argv,
                        env=dict(env) if env is not None else None,
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                        preexec_fn=_die_with_parent,
                    )
                )
            out.write(f"[{w.label}] worker started (pid {procs[-1].pid}), output in {path}\n")
        while not stop.is_set() and any(p.poll() is None for p in procs):
            follow.poll()
            stop.wait(0.2)
        if stop.is_set():
            _stop_all(procs, grace_s, follow)
    except BaseException:
        _stop_all(procs, grace_s, follow)
        raise
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
    follow.poll(final=True)
    codes = [p.returncode for p in procs]
    for w, code in zip(workers, codes, strict=True):
        out.write(f"[{w.label}] worker exited {code}\n")
    out.flush()
    if stop.is_set():
        return INTERRUPTED
    return next((c for c in codes if c != 0), 0)


def _stop_all(procs: Sequence[subprocess.Popen[bytes]], grace_s: float, follow: _Follow) -> None:
    """SIGTERM to every live worker, SIGKILL to any still alive after ``grace_s``; reaps them all."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
        follow.poll()
        time.sleep(0.2)
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()
