"""What else ran on the server's cores and the clients' during a run (``CoreWatch`` -> ``HostLoad``), and
the CPU time of processes."""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass
from pathlib import Path


def _cpu_busy_s(cpus: set[int]) -> float:
    """Busy seconds of these cores since boot (/proc/stat: all but idle and iowait)."""
    tck = os.sysconf("SC_CLK_TCK")
    busy = 0
    for line in Path("/proc/stat").read_text().splitlines():
        name, *values = line.split()
        if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus:
            v = [int(x) for x in values]
            busy += sum(v) - v[3] - v[4]
    return busy / tck


def group_cpu_s(pgid: int) -> float:
    """CPU seconds (user + system) of the live processes of one process group."""
    tck = os.sysconf("SC_CLK_TCK")
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:
            total += int(fields[11]) + int(fields[12])
    return total / tck


@dataclass(frozen=True)
class HostLoad:
    """Who used the cores during a run, in shares of the cores' time (1.0 = one core busy): the server
    on its cores, everything else on them (other engineers' servers and tests, on a shared machine),
    and everything but the client on the client's cores (a busy neighbour there delays the client's
    reads, and on a small VM slows the server's core too)."""

    server_share: float
    others_share: float
    client_others_share: float = 0.0

    @property
    def worst(self) -> float:
        return max(self.others_share, self.client_others_share)


#: (monotonic time, busy s of the server's cores, CPU s of the server, busy s of the client's cores)
Snapshot = tuple[float, float, float, float]


class CoreWatch:
    """Measures ``HostLoad`` over a stretch of time, for a server running as process group ``pgid``
    pinned to ``cpus`` and clients pinned to ``client_cpus``."""

    def __init__(self, pgid: int, cpus: set[int], client_cpus: set[int]) -> None:
        self.pgid, self.cpus, self.client_cpus = pgid, cpus, client_cpus

    @classmethod
    def of(cls, pid: int, client_cpus: str) -> CoreWatch:
        """For a server started in its own session (nova's ``Server``: ``server.proc.pid``)."""
        from nova_search.spec import parse_cores

        clients = set(parse_cores(client_cpus))
        return cls(os.getpgid(pid), os.sched_getaffinity(pid), clients)

    def snapshot(self) -> Snapshot:
        return (
            time.monotonic(),
            _cpu_busy_s(self.cpus),
            group_cpu_s(self.pgid),
            _cpu_busy_s(self.client_cpus),
        )

    def wait_quiet(self, limit: float, until: float | None, probe_s: float = 0.5) -> bool:
        """Wait until a ``probe_s`` stretch in which other processes took at most ``limit`` of the
        server's cores and of the client's (the server and the clients idle between runs), or until
        ``until`` (``time.monotonic``); whether it came."""
        while True:
            before = self.snapshot()
            time.sleep(probe_s)
            if self.load(before, self.snapshot()).worst <= limit:
                return True
            if until is not None and time.monotonic() > until:
                return False

    @staticmethod
    def load(before: Snapshot, after: Snapshot, client_cpu_s: float = 0.0) -> HostLoad:
        """The load between two snapshots; ``client_cpu_s``: what the client used meanwhile."""
        wall = max(after[0] - before[0], 1e-9)
        server = after[2] - before[2]
        return HostLoad(
            server_share=server / wall,
            others_share=max(0.0, after[1] - before[1] - server) / wall,
            client_others_share=max(0.0, after[3] - before[3] - client_cpu_s) / wall,
        )


def proc_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime
