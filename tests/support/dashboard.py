"""`nova-search dashboard` as a subprocess on a free loopback port, for tests that read its HTTP API."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import httpx

from nova_search.engine.server import free_port
from tests.support import REPO


@contextmanager
def serve_dashboard(url: str, artifacts: Path, env: Mapping[str, str] | None = None) -> Iterator[str]:
    """The dashboard over ``url`` (its artifacts under ``artifacts``); yields its base URL."""
    port = free_port()
    argv = ["dashboard", "--storage", url, "--artifacts-dir", str(artifacts), "--port", str(port)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "nova_search", *argv],
        cwd=REPO,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    try:
        while True:
            try:
                if httpx.get(f"{base}/api/meta", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise AssertionError(f"the dashboard did not start: {proc.communicate()[0][-2000:]}")
            time.sleep(0.2)
        yield base
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)


def study_detail(base: str, study_name: str) -> tuple[int, dict]:
    """The dashboard API's view of one study: its id and its detail (trials, attributes, notes)."""
    studies = httpx.get(f"{base}/api/studies", timeout=30).json()["study_summaries"]
    (summary,) = [s for s in studies if s["study_name"] == study_name]
    body = httpx.get(f"{base}/api/studies/{summary['study_id']}", timeout=30).json()
    return summary["study_id"], body
