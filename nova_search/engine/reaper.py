"""A tiny guard process: it holds the read end of a pipe from the worker, and when the worker dies
(kill -9, node loss) the pipe closes and the guard kills the server's whole process group.

Run as ``python -m nova_search.engine.reaper PGID [KEY_FILE]``; stdin is the pipe. With KEY_FILE (the
server's API key file), it also deletes that file after the kill: a worker killed before its server
was up never gets to. It is started in its own session, so signals sent to the worker's terminal do
not reach it, and it needs nothing but the stdlib.
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
    if key_file is not None:
        try:
            os.unlink(key_file)
        except FileNotFoundError:
            pass


if __name__ == "__main__":
    main()
