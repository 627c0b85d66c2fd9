"""Every command that opens the storage is bounded by the retry window (issue 53): against a database
server that accepts the TCP connection and never answers, ``create``, ``run``, ``db upgrade``,
``worker``, ``status``, ``best`` and ``dump`` each exit 5 (storage) within NOVA_STORAGE_RETRY_S plus a
small margin (the interpreter's start and one backoff), with one line naming the storage, password
masked. Before, the schema lock of create, run and db upgrade ignored the connect timeout: 130 s."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from nova_search.testing.fault_table import note
from tests.support import REPO
from tests.support.net import SilentServer

pytestmark = pytest.mark.faults

WINDOW_S = 4
#: the interpreter's start (a second or two on a loaded machine), the last backoff, the teardown
MARGIN_S = 6
COMMANDS = {
    "create": ("create", "{spec}"),
    "run": ("run", "{spec}"),
    "db upgrade": ("db", "upgrade"),
    "worker": ("worker", "tiny-cpu"),
    "node": ("node", "tiny-cpu", "--gpus", "0"),
    "status": ("status", "tiny-cpu"),
    "best": ("best", "tiny-cpu"),
    "dump": ("dump", "tiny-cpu"),
}


def _run(argv: list[str], env: dict[str, str]) -> tuple[int | None, float, str]:
    t0 = time.monotonic()
    try:
        r = subprocess.run(
            [sys.executable, "-m", "nova_search", *argv], cwd=REPO, env=env, capture_output=True,
            text=True, timeout=WINDOW_S + 60,
        )  # fmt: skip
        return r.returncode, time.monotonic() - t0, r.stderr
    except subprocess.TimeoutExpired:
        return None, time.monotonic() - t0, "still running after the test's own timeout"


def test_a_server_that_never_answers_costs_every_command_its_retry_window(tmp_path: Path) -> None:
    spec = REPO / "studies" / "tiny-cpu.yaml"
    with SilentServer() as srv:
        url = f"postgresql+psycopg://nova:hunter2@127.0.0.1:{srv.port}/nova"
        env = {
            **{k: v for k, v in os.environ.items() if k != "NOVA_STORAGE"},
            "NOVA_STORAGE": url,
            "NOVA_STORAGE_RETRY_S": str(WINDOW_S),
            "NOVA_ENGINE_PYTHON": sys.executable,  # run gets as far as the storage
        }
        argvs = {name: [str(spec) if a == "{spec}" else a for a in argv] for name, argv in COMMANDS.items()}
        with ThreadPoolExecutor(max_workers=2) as pool:
            outcomes = dict(zip(argvs, pool.map(lambda a: _run(a, env), argvs.values()), strict=True))
    for name, (code, took, _err) in outcomes.items():
        note(
            "hangs",
            f"storage that never answers: {name}",
            hung=int(code is None or took > WINDOW_S + MARGIN_S),
        )
    for name, (code, took, err) in outcomes.items():
        assert code == 5, (name, code, err[-1500:])
        assert took <= WINDOW_S + MARGIN_S, (name, f"{took:.1f} s", err[-1500:])
        assert "Traceback" not in err and "hunter2" not in err, (name, err[-1500:])
        assert f"127.0.0.1:{srv.port}" in err and "***" in err, (name, err[-1500:])
