"""A slot: one GPU group of a worker, where one trial runs at a time. It owns its GPUs, the servers
running on it now (so that an interrupt can stop them all) and, under ``spec.confirm``, its resident
leader: the server trials are measured against, kept up between them (``Resident``), with how it waits
(``park``) and the host memory kept free beside it. When to keep, adopt or let go of the leader:
``residency``."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from nova_search.engine.server import Server
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

    @classmethod
    def of(cls, spec: StudySpec, gpus: tuple[int, ...]) -> Slot:
        """A slot of ``gpus``; with ``spec.confirm``, one that keeps a leader."""
        park = park_mode(spec)
        reserve = int(spec.confirm.host_reserve_gib * GIB) if spec.confirm is not None else 0
        return cls(gpus, park, reserve)

    def track(self, server: Server) -> None:
        """A server started (or starting) on this slot: an interrupt stops it."""
        self.servers.add(server)

    def stop(self, server: Server) -> None:
        server.stop()
        self.servers.discard(server)

    def stop_servers(self) -> None:
        for server in list(self.servers):
            server.stop()

    def let_go(self, why: str) -> str:
        """Stop the leader; a note of why."""
        r = self.leader
        assert r is not None
        self.leader = None
        self.servers.discard(r.server)
        r.server.stop()
        log.info("leader #%s let go: %s", r.number, why)
        return f"leader #{r.number} let go: {why}"

    def close(self) -> None:
        """The worker is done with this slot: its leader goes with it."""
        if self.leader is not None:
            self.let_go("the worker is done")
