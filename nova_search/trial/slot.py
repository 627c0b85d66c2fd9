"""A slot: one GPU group of a worker, where one trial runs at a time. It owns its GPUs, the servers
running on it now (so that an interrupt can stop them all) and, under ``spec.confirm``, its resident
leader: the server trials are measured against, kept up between them (``Resident``), with how it waits
(``park``) and the host memory kept free beside it. When to keep, adopt or let go of the leader:
``residency``.

A slot holds its GPUs on the host while a server of it runs (``hold_gpus``, before the first boot,
until the last server stops): one lock per GPU index, an exclusive ``flock`` (filelock) on
``gpu-N.lock`` in the GPU lock folder (``NOVA_GPU_LOCK_DIR``; default
``$XDG_RUNTIME_DIR/nova-search-gpu-locks``, else ``/tmp/nova-search-gpu-locks-UID``). Two workers of
one host given the same ``--gpus`` then take turns instead of running servers on one GPU at once; the
kernel releases a killed worker's locks."""

from __future__ import annotations

import logging
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout

from nova_search.engine.server import Server
from nova_search.errors import TrialFailure
from nova_search.spec import StudySpec

log = logging.getLogger(__name__)

GIB = 1024**3


def park_mode(spec: StudySpec) -> str | None:
    """How the leader waits between windows: sleep, keep, or None without ``confirm``."""
    if spec.confirm is None:
        return None
    if spec.confirm.park != "auto":
        return spec.confirm.park
    return "keep" if spec.engine.device == "cpu" else "sleep"


def gpu_lock_dir() -> Path:
    """Where the per-host GPU locks are (see the module docstring)."""
    given = os.environ.get("NOVA_GPU_LOCK_DIR")
    if given:
        return Path(given)
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime):
        return Path(runtime) / "nova-search-gpu-locks"
    return Path(tempfile.gettempdir()) / f"nova-search-gpu-locks-{os.getuid()}"


def _holder(folder: Path, gpu: int) -> str:
    try:
        return (folder / f"gpu-{gpu}.holder").read_text(encoding="utf-8")[:200].strip() or "unknown"
    except OSError:
        return "unknown"


@dataclass
class Resident:
    server: Server
    number: int
    stage: str
    #: its first objective's value
    value: float
    asleep: bool = False


class Slot:
    """One GPU group's servers and its leader (at most one). Not thread-safe beyond ``stop_servers``
    (an interrupt, from the worker's main thread): one trial at a time runs on a slot."""

    def __init__(self, gpus: tuple[int, ...] = (), park: str | None = None, reserve_bytes: int = 0) -> None:
        self.gpus = gpus
        #: how the leader waits between windows ("sleep", "keep"); None: the slot keeps no leader
        self.park = park
        #: host memory kept free beside a sleeper's weights (confirm.host_reserve_gib)
        self.reserve_bytes = reserve_bytes
        self.servers: set[Server] = set()
        self.leader: Resident | None = None
        self._gpu_locks: list[FileLock] = []

    @classmethod
    def of(cls, spec: StudySpec, gpus: tuple[int, ...]) -> Slot:
        """A slot of ``gpus``; with ``spec.confirm``, one that keeps a leader."""
        park = park_mode(spec)
        reserve = int(spec.confirm.host_reserve_gib * GIB) if spec.confirm is not None else 0
        return cls(gpus, park, reserve)

    def hold_gpus(self, wait_s: float) -> None:
        """Hold this slot's GPUs on the host (a no-op without GPUs, or when held already), waiting up
        to ``wait_s`` for another worker's server on them to stop; TrialFailure ``timeout`` after."""
        if not self.gpus or self._gpu_locks:
            return
        folder = gpu_lock_dir()
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        until = time.monotonic() + wait_s
        held: list[FileLock] = []
        try:
            for gpu in sorted(set(self.gpus)):  # one order for every worker: no deadlock
                lock = FileLock(folder / f"gpu-{gpu}.lock", mode=0o600, preserve_lock_file=True)
                try:
                    lock.acquire(timeout=0)
                except Timeout:
                    log.warning(
                        "GPU %s is held by another nova worker on this host (%s): waiting up to %.0f s",
                        gpu,
                        _holder(folder, gpu),
                        max(until - time.monotonic(), 0.0),
                    )
                    try:
                        lock.acquire(timeout=max(until - time.monotonic(), 0.0), poll_interval=0.2)
                    except Timeout:
                        raise TrialFailure(
                            "timeout",
                            f"GPU {gpu} stayed held by another nova worker on this host "
                            f"({_holder(folder, gpu)}) for {wait_s:.0f} s; give each worker of a host "
                            "its own --gpus",
                        ) from None
                held.append(lock)
                (folder / f"gpu-{gpu}.holder").write_text(f"pid {os.getpid()}", encoding="utf-8")
        except BaseException:
            for lock in held:
                lock.release()
            raise
        self._gpu_locks = held

    def _release_gpus(self) -> None:
        """Let the GPUs go once no server of this slot runs."""
        if self.servers:
            return
        locks, self._gpu_locks = self._gpu_locks, []
        for lock in locks:
            lock.release()

    def track(self, server: Server) -> None:
        """A server started (or starting) on this slot: an interrupt stops it."""
        self.servers.add(server)

    def stop(self, server: Server) -> None:
        try:
            server.stop()
        finally:
            self.servers.discard(server)
            self._release_gpus()

    def stop_servers(self) -> None:
        for server in list(self.servers):
            server.stop()

    def let_go(self, why: str) -> str:
        """Stop the leader; a note of why."""
        r = self.leader
        assert r is not None
        self.leader = None
        self.servers.discard(r.server)
        try:
            r.server.stop()
        finally:
            self._release_gpus()
        log.info("leader #%s let go: %s", r.number, why)
        return f"leader #{r.number} let go: {why}"

    def close(self) -> None:
        """The worker is done with this slot: its leader goes with it."""
        if self.leader is not None:
            self.let_go("the worker is done")
        self.servers.clear()
        self._release_gpus()
