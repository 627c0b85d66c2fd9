"""A tiny guard process: it holds the read end of a pipe from the worker, and when the worker dies
(kill -9, node loss) the pipe closes and the guard kills the server's whole process group, and every
process that carries the server's mark (``kill_marked``).

Run as ``python -m nova_search.engine.reaper PGID [KEY_FILE]``; stdin is the pipe; the server's mark in
its environment as ``NOVA_REAP_MARK``. With KEY_FILE (the server's API key file), it also deletes that
file after the kill: a worker killed before its server was up never gets to. It is started in its own
session, so signals sent to the worker's terminal do not reach it, and it needs nothing but the stdlib.

The mark: every server is started with ``NOVA_ENGINE_MARK=<a token of its own>`` in its environment,
which its children inherit. A child that leaves the server's process group (``setsid``, a daemon that
forks twice) escapes ``killpg``, not the mark: ``marked`` finds it in ``/proc/PID/environ`` (the
environment a process started with). A process that clears its own environment would escape this too.
"""

from __future__ import annotations

import os
import signal
import sys
import time


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


#: the environment variable that marks every process of one server (its value: that server's token)
MARK_VAR = "NOVA_ENGINE_MARK"


def marked(mark: str) -> list[int]:
    """The pids of the live processes whose starting environment holds ``NOVA_ENGINE_MARK=mark`` (ours
    to read: this user's); [] where there is no /proc."""
    needle = f"{MARK_VAR}={mark}".encode()
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for name in entries:
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                environ = f.read()
        except OSError:  # gone, or another user's
            continue
        if needle in environ.split(b"\0"):
            found.append(int(name))
    return found


def kill_marked(mark: str, grace_s: float = 2.0) -> list[int]:
    """SIGTERM, then after ``grace_s`` SIGKILL, every process that carries ``mark`` (a server's child
    that left its process group); returns the pids found (none: [])."""
    found = marked(mark)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        left = [pid for pid in found if pid in marked(mark)]
        for pid in left:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + grace_s
        while left and time.monotonic() < deadline:
            time.sleep(0.05)
            left = [pid for pid in left if pid in marked(mark)]
        if not left:
            break
    return found


def reap(pgid: int, grace_s: float = 5.0) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and _alive(pgid):
            time.sleep(0.1)


def main() -> None:
    pgid = int(sys.argv[1])
    key_file = sys.argv[2] if len(sys.argv) > 2 else None
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        while sys.stdin.buffer.read(1):  # the worker never writes; EOF means it has gone
            pass
    except OSError:
        pass
    reap(pgid)
    mark = os.environ.get("NOVA_REAP_MARK")
    if mark:
        kill_marked(mark)
    if key_file is not None:
        try:
            os.unlink(key_file)
        except FileNotFoundError:
            pass


if __name__ == "__main__":
    main()
