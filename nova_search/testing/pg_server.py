"""A throwaway PostgreSQL server for the fleet benchmark and the connection tests: ``initdb`` +
``pg_ctl`` on a free port, with the settings under test (``max_connections``; password auth), as the
``postgres`` user when run as root (PostgreSQL refuses root). Removed afterwards. Also what the
benchmark reads of it: connections held (``pg_stat_activity``), transactions committed
(``pg_stat_database``) and the CPU time of the server's processes (``/proc``).

Never the machine's shared server: its settings must not change.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg

from nova_search.testing.pg import as_postgres, free_port


@dataclass
class Server:
    """A running throwaway server; ``url`` is the superuser's, on database ``postgres``."""

    data_dir: str
    port: int
    password: str | None

    @property
    def url(self) -> str:
        auth = f"postgres:{self.password}" if self.password else "postgres"
        return f"postgresql+psycopg://{auth}@127.0.0.1:{self.port}/postgres"

    def libpq(self, dbname: str = "postgres") -> str:
        return self.url.replace("postgresql+psycopg://", "postgresql://", 1).rsplit("/", 1)[0] + f"/{dbname}"

    def create_database(self, name: str) -> str:
        with psycopg.connect(self.libpq(), autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url.rsplit("/", 1)[0] + f"/{name}"

    def postmaster_pid(self) -> int:
        return int(Path(self.data_dir, "postmaster.pid").read_text().split()[0])

    def cpu_s(self) -> float:
        """CPU seconds of the server so far: the postmaster's own, the backends it has reaped
        (cutime, cstime), and the live children's. Backends come and go (a connection per
        transaction): the reaped ones are in the postmaster's cutime."""
        tick = os.sysconf("SC_CLK_TCK")
        pid = self.postmaster_pid()
        total = sum(_stat(pid)[13:17]) / tick  # utime, stime, cutime, cstime
        for child in _children(pid):
            fields = _stat(child)
            if fields:
                total += sum(fields[13:15]) / tick
        return total


def _stat(pid: int) -> list[int]:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return []
    rest = raw.rsplit(")", 1)[1].split()  # fields 3.. after the command name
    return [0, 0] + [int(x) if x.lstrip("-").isdigit() else 0 for x in rest]


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            out += [int(c) for c in (task / "children").read_text().split()]
    return out


@contextlib.contextmanager
def throwaway_server(max_connections: int = 100, password: str | None = None) -> Iterator[Server]:
    """A fresh server on a free port; trust auth, or scram-sha-256 with ``password`` for postgres."""
    data_dir = tempfile.mkdtemp(prefix="nova-fleet-pg-")
    os.chmod(data_dir, 0o700)
    if os.geteuid() == 0:
        shutil.chown(data_dir, "postgres", "postgres")
    initdb = ["initdb", "-D", data_dir, "-U", "postgres"]
    pwfile = None
    if password:
        pwfile = Path(tempfile.mkdtemp(prefix="nova-fleet-pw-")) / "pw"
        pwfile.write_text(password + "\n")
        os.chmod(pwfile.parent, 0o755)
        os.chmod(pwfile, 0o644)
        initdb += ["-A", "scram-sha-256", f"--pwfile={pwfile}"]
    else:
        initdb += ["-A", "trust"]
    try:
        subprocess.run(as_postgres(initdb), check=True, capture_output=True)
    finally:
        if pwfile:
            shutil.rmtree(pwfile.parent, ignore_errors=True)
    port = free_port()
    opts = (
        f"-p {port} -k {data_dir} -c listen_addresses=127.0.0.1 -c max_connections={max_connections} "
        "-c shared_buffers=128MB -c fsync=on -c log_min_messages=fatal"
    )
    ctl = ["pg_ctl", "-D", data_dir, "-w", "-t", "60"]
    subprocess.run(
        as_postgres([*ctl, "-l", f"{data_dir}/log", "start", "-o", opts]), check=True, capture_output=True
    )
    try:
        yield Server(data_dir, port, password)
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):
            subprocess.run(as_postgres([*ctl, "-m", "immediate", "stop"]), check=True, capture_output=True)
        shutil.rmtree(data_dir, ignore_errors=True)


def pgbouncer_binary() -> str | None:
    """Debian's PgBouncer (``apt-get install pgbouncer``: /usr/sbin, often not on a user's PATH)."""
    return shutil.which("pgbouncer") or next(
        (p for p in ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer") if os.access(p, os.X_OK)), None
    )


@contextlib.contextmanager
def pgbouncer(server: Server, pool_size: int, max_client_conn: int = 2000) -> Iterator[str]:
    """PgBouncer in transaction mode in front of ``server`` on a free port, as a team would run it
    (docs/deploy/cluster.md); yields the SQLAlchemy URL of its database ``fleet`` for the workers.
    ``pool_size``: the server connections PgBouncer opens per database and user."""
    binary = pgbouncer_binary()
    if binary is None:
        raise RuntimeError("PgBouncer is not installed: apt-get install pgbouncer")
    folder = tempfile.mkdtemp(prefix="nova-pgbouncer-")
    port = free_port()
    Path(folder, "users.txt").write_text('"postgres" ""\n')
    Path(folder, "pgbouncer.ini").write_text(
        "[databases]\n"
        f"* = host=127.0.0.1 port={server.port}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        f"auth_type = trust\nauth_file = {folder}/users.txt\n"
        f"pool_mode = transaction\ndefault_pool_size = {pool_size}\nmax_client_conn = {max_client_conn}\n"
        f"logfile = {folder}/pgbouncer.log\npidfile = {folder}/pgbouncer.pid\n"
        "ignore_startup_parameters = extra_float_digits,options\nadmin_users = postgres\n"
    )
    if os.geteuid() == 0:  # PgBouncer refuses to run as root
        shutil.chown(folder, "postgres", "postgres")
        for name in os.listdir(folder):
            shutil.chown(Path(folder, name), "postgres", "postgres")
    as_postgres = {"user": "postgres", "group": "postgres"} if os.geteuid() == 0 else {}
    # itself, not under runuser: terminate() must reach it. Its log goes to the log file only: it also
    # writes every line to stderr, and an unread pipe filled up and froze it
    proc = subprocess.Popen(
        [binary, "-q", f"{folder}/pgbouncer.ini"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        **as_postgres,
    )
    try:
        libpq = f"host=127.0.0.1 port={port} dbname=fleet user=postgres"
        for _ in range(100):
            if proc.poll() is not None:
                log = Path(folder, "pgbouncer.log")
                raise RuntimeError(
                    f"PgBouncer exited: {log.read_text(errors='replace')[-500:] if log.exists() else ''}"
                )
            try:
                with psycopg.connect(libpq, connect_timeout=2, prepare_threshold=None) as conn:
                    conn.execute("SELECT 1")
                break
            except psycopg.OperationalError:
                time.sleep(0.1)
        else:
            raise RuntimeError("PgBouncer did not answer in 10 s")
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/fleet"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(folder, ignore_errors=True)
