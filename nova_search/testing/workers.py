"""Worker processes for coordination tests and the storm benchmark: start ``nova-search worker`` as a
subprocess, find the stand-in engines (or vLLM servers) left on the machine, wait for a condition with
a deadline."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from nova_search.testing import REPO
from nova_search.testing.specs import FAKE_ENGINE, FAKE_ENGINE_TAG


def worker(url: str, tmp_path: Path, name: str = "dist", *args: str, **env: str) -> subprocess.Popen[str]:
    """``nova-search worker NAME --storage URL`` in the background, output to its stdout pipe."""
    return _background("worker", name, "--storage", url, *_artifacts(tmp_path), *args, env=env)


def node(url: str, tmp_path: Path, name: str = "dist", *args: str, **env: str) -> subprocess.Popen[str]:
    """``nova-search node NAME`` (the storage in NOVA_STORAGE) in the background, output to its pipe."""
    return _background("node", name, *_artifacts(tmp_path), *args, env={"NOVA_STORAGE": url, **env})


def _artifacts(tmp_path: Path) -> tuple[str, str]:
    return ("--artifacts-dir", str(tmp_path / "artifacts"))


def _background(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    """``nova-search ARGS`` from the repository, with this environment plus ``env``."""
    return subprocess.Popen(
        [sys.executable, "-m", "nova_search", *args],
        cwd=REPO,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def children(pid: int) -> list[int]:
    """The live (non-zombie) processes whose parent is ``pid``."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            out.append(int(stat.parent.name))
    return out


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live (non-zombie) process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


#: every process's pid, state and whole command line: ``-ww``, for without a terminal (under pytest's
#: capture) ps cuts each line at 80 columns, and from a checkout at a longer path the engine's module name
#: fell past the cut: every stand-in engine went unseen (13 tests of a fresh clone in /tmp/tmp.*/c)
PS = ["ps", "-ww", "-eo", "pid=,stat=,args="]


def fake_engines() -> list[str]:
    """Live stand-in engines (and the sleepers some of them start) that this test process started, as
    "PID STAT ARGS" lines. Ours are told apart by FAKE_ENGINE_TAG in their environment (tests/conftest.py
    gives each pytest process its own, a stand-in spec passes it on): the other processes of a parallel
    run, or other runs on the machine, have their own. Without a tag, every one on the machine."""
    out = subprocess.run(PS, capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        pid, stat, args = (line.split(None, 2) + ["", ""])[:3]
        if (FAKE_ENGINE in args or "time.sleep(3600)" in args) and not stat.startswith("Z") and _ours(pid):
            found.append(line.strip())
    return found


def fake_engine_pids() -> list[int]:
    """The pids of the stand-in engines (not their children) that this test process started."""
    return [int(line.split()[0]) for line in fake_engines() if FAKE_ENGINE in line]


def _ours(pid: str) -> bool:
    """Whether process ``pid`` carries this test process's FAKE_ENGINE_TAG (always, with no tag set)."""
    tag = os.environ.get(FAKE_ENGINE_TAG)
    if not tag:
        return True
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:  # gone, or another user's
        return False
    return f"{FAKE_ENGINE_TAG}={tag}".encode() in environ.split(b"\0")


def vllm_processes() -> set[str]:
    """Live (non-zombie) vLLM processes on this machine, API servers and engine cores, as
    "PID ARGS" lines. Compare the set before and after a test to find what it left behind."""
    out = subprocess.run(PS, capture_output=True, text=True, check=True).stdout
    found = set()
    for line in out.splitlines():
        pid, stat, args = (line.split(None, 2) + ["", ""])[:3]
        if ("vllm.entrypoints" in args or "VLLM::" in args) and not stat.startswith("Z"):
            found.add(f"{pid} {args}")
    return found


def finish(procs: list[subprocess.Popen[str]], timeout: float) -> tuple[list[str], int]:
    """Wait up to ``timeout`` seconds in all for ``procs`` to exit; kill the ones still running then.
    Returns every process's output and how many had to be killed (hung)."""
    deadline = time.monotonic() + timeout
    outs: list[str] = []
    hung = 0
    for p in procs:
        try:
            outs.append(p.communicate(timeout=max(0.1, deadline - time.monotonic()))[0] or "")
        except subprocess.TimeoutExpired:
            hung += 1
            p.kill()
            outs.append((p.communicate()[0] or "") + "\n[killed: still running at the bound]")
    return outs, hung


def wait_until(predicate: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")
