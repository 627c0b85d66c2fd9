"""The API key on a launched server (the stand-in engine, started as vLLM is): it reaches the server
through a private file that is gone once read, and never stays in the server's log. (The launch plan
and the rest of the safety rules: tests/unit/test_safety.py.)"""

from __future__ import annotations

import stat
import sys

import httpx

from nova_search.engine.command import build_launch, new_api_key
from nova_search.engine.server import Server, free_port
from nova_search.knobs import EngineConfig
from nova_search.spec import EngineSpec, ModelSpec
from nova_search.testing.specs import FAKE_ENGINE


def test_the_key_reaches_the_server_through_a_private_file_and_never_stays_in_its_log(tmp_path):
    """The stand-in engine logs the key it read from --config, as vLLM 0.26 does; nova masks it once the
    server is up, keeps the log to its user, and deletes the key file."""
    key = new_api_key()
    engine = EngineSpec(command=[sys.executable, "-m", FAKE_ENGINE], device="cpu")
    plan = build_launch(engine, ModelSpec(path="m"), EngineConfig(), port=free_port(), api_key=key)
    server = Server(plan, tmp_path / "server.log", boot_timeout_s=30)
    with server:
        assert plan.key_file is not None and not plan.key_file.exists()  # read at start-up, then gone
        log = server.log_path.read_text()
        assert "'api_key': ['" + "*" * len(key) + "']" in log and key not in log
        assert stat.S_IMODE(server.log_path.stat().st_mode) == 0o600
        url = f"{server.base_url}/v1/models"
        assert httpx.get(url, headers={"Authorization": f"Bearer {key}"}).status_code == 200
        assert httpx.get(url).status_code == 401
    assert key not in server.log_path.read_text()
