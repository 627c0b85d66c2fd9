"""PostgreSQL for tests and the storage benchmarks: fresh databases on the machine's server, and a
throwaway server of our own (for the restart test, which must not restart a server others use)."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import optuna
import psycopg
from optuna.trial import FrozenTrial, TrialState

SHARED = os.environ.get("NOVA_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


def _libpq(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def _admin_url(url: str) -> str:
    base, _, _db = url.rpartition("/")
    return f"{base}/postgres"


@contextlib.contextmanager
def fresh_database(server_url: str = SHARED) -> Iterator[str]:
    """A new, empty database on the server; dropped afterwards. Fails loudly if unreachable."""
    name = f"nova_t_{uuid.uuid4().hex[:10]}"
    admin = _libpq(_admin_url(server_url))
    with psycopg.connect(admin, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base, _, _ = server_url.rpartition("/")
    try:
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(admin, autocommit=True, connect_timeout=5) as conn:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class OwnServer:
    url: str
    data_dir: str
    port: int

    def _ctl(self, *args: str) -> None:
        subprocess.run(
            as_postgres(["pg_ctl", "-D", self.data_dir, "-w", "-t", "60", *args]),
            check=True,
            capture_output=True,
        )

    def restart(self) -> None:
        self._ctl("-m", "fast", "-l", f"{self.data_dir}/log", "restart", "-o", self._opts())

    def stop(self) -> None:
        self._ctl("-m", "immediate", "stop")

    def start(self) -> None:
        self._ctl("-l", f"{self.data_dir}/log", "start", "-o", self._opts())

    def _opts(self) -> str:
        return f"-p {self.port} -k {self.data_dir} -c listen_addresses=127.0.0.1"


def as_postgres(argv: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


@contextlib.contextmanager
def own_server() -> Iterator[OwnServer]:
    """A throwaway PostgreSQL server (initdb + pg_ctl) on a free port, removed afterwards."""
    data_dir = tempfile.mkdtemp(prefix="nova-pg-")
    if os.geteuid() == 0:
        shutil.chown(data_dir, "postgres", "postgres")
    subprocess.run(
        as_postgres(["initdb", "-D", data_dir, "-A", "trust", "-U", "postgres"]),
        check=True,
        capture_output=True,
    )
    port = free_port()
    server = OwnServer(f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres", data_dir, port)
    server.start()
    try:
        yield server
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):
            server.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


def read_trials(url: str, study_name: str, states: tuple[TrialState, ...] | None = None) -> list[FrozenTrial]:
    """A study's trials, read on a storage of no pool that is closed again (``optuna.load_study(url)``
    builds a pooled engine per call whose connection stays open until the engine is collected: a
    test polling a small server filled it that way)."""
    from nova_search.db import open_storage

    storage = open_storage(url, read_only=True)
    try:
        return optuna.load_study(study_name=study_name, storage=storage).get_trials(
            deepcopy=False, states=states
        )
    finally:
        storage.engine.dispose()
