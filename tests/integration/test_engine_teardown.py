"""What a server leaves behind (issue 53), on the stand-in engine: the secrets nova put into it, a child
that left its process group, and an endless log.

- An engine that prints the HF_TOKEN nova expanded into its environment (and an inherited token, and a
  value expanded from the worker's environment under a name that says nothing) and dies at boot: the
  stored log tail (``nova:log_tail``), the dashboard notes, every table, ``dump`` and the server log
  artifact hold none of them, only their masks.
- A child that detaches itself (``setsid``) does not survive the server's teardown, nor the reaper's
  when the worker dies: it carries the server's mark, is killed and reported (``Server.detached``).
- A server log past ``MAX_LOG_BYTES`` is capped when the server stops, its head and tail kept."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import optuna
import pytest
from sqlalchemy import create_engine, text

from nova_search import schema
from nova_search.engine.command import build_launch, new_api_key
from nova_search.engine.server import LOG_HEAD_BYTES, MAX_LOG_BYTES, Server, free_port
from nova_search.knobs import EngineConfig
from nova_search.search import lifecycle as nova_study
from nova_search.spec import EngineSpec, ModelSpec, parse_spec
from nova_search.testing.fake_engine import __name__ as FAKE_ENGINE
from nova_search.testing.fault_table import note
from nova_search.testing.pg import fresh_database
from nova_search.testing.specs import fake_spec_dict
from nova_search.testing.workers import fake_engines, wait_until, worker
from tests.support.cli import nova

pytestmark = pytest.mark.faults

TOKENS = {
    "HF_TOKEN, expanded from ${HF_TOKEN}": "hf_ExpandedTok_61c2",
    "HUGGING_FACE_HUB_TOKEN, inherited": "hf_InheritedTok_8e0d",
    "CORP_CFG, expanded under a plain name": "corpValue_27b4",
}


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _all_tables(url: str) -> str:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            tables = list(
                conn.execute(text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")).scalars()
            )
            return "\n".join(
                str(v) for t in tables for row in conn.execute(text(f'SELECT * FROM "{t}"')) for v in row
            )
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_a_token_the_engine_prints_as_it_dies_is_stored_nowhere(tmp_path: Path) -> None:
    raw = fake_spec_dict(2, name="tok")
    raw["engine"]["env"] = {
        **raw["engine"]["env"],
        "HF_TOKEN": "${HF_TOKEN}",
        "CORP_CFG": "${CORP_SOURCE}",
        "FAKE_ENGINE_PRINT_ENV": "HF_TOKEN,HUGGING_FACE_HUB_TOKEN,CORP_CFG",
        "FAKE_ENGINE_DIE": "1",
    }
    with fresh_database() as url:
        nova_study.create(parse_spec(raw), url, "tok")
        proc = worker(
            url,
            tmp_path,
            "tok",
            HF_TOKEN=TOKENS["HF_TOKEN, expanded from ${HF_TOKEN}"],
            HUGGING_FACE_HUB_TOKEN=TOKENS["HUGGING_FACE_HUB_TOKEN, inherited"],
            CORP_SOURCE=TOKENS["CORP_CFG, expanded under a plain name"],
        )
        out = proc.communicate(timeout=180)[0]
        assert proc.returncode == 3, out[-3000:]  # every trial failed at boot: nothing measured
        dump = nova("dump", "tok", "--storage", url).stdout
        places = {
            "every table (log tails, dashboard notes)": _all_tables(url),
            "dump": dump,
            "worker output": out,
            **{
                f"artifact {p.relative_to(tmp_path)}": p.read_text(errors="replace")
                for p in (tmp_path / "artifacts").rglob("*")
                if p.is_file()
            },
        }
        found = [
            f"{where}: {what}" for where, body in places.items() for what, v in TOKENS.items() if v in body
        ]
        note("secrets", "tokens an engine prints as it dies at boot", secrets=len(found))
        assert found == []
        tails = [
            schema.LOG_TAIL.read(t.user_attrs) or ""
            for t in optuna.load_study(study_name="tok", storage=url).get_trials()
        ]
        masked = "environment: HF_TOKEN=" + "*" * len(TOKENS["HF_TOKEN, expanded from ${HF_TOKEN}"])
        assert tails and all(masked in t for t in tails), tails  # what the engine said, the token masked
    assert fake_engines() == []


def _server(tmp_path: Path, **env: str) -> Server:
    engine = EngineSpec(
        command=[sys.executable, "-m", FAKE_ENGINE],
        device="cpu",
        env=env,
        stop_timeout_s=5,
        boot_timeout_s=30,
    )
    plan = build_launch(engine, ModelSpec(path="m"), EngineConfig(), port=free_port(), api_key=new_api_key())
    return Server(plan, tmp_path / "server.log", boot_timeout_s=30.0, stop_timeout_s=5.0, poll_interval_s=0.1)


def test_a_child_that_left_the_process_group_does_not_survive_teardown(tmp_path: Path) -> None:
    pid_file = tmp_path / "detached.pid"
    with _server(tmp_path, FAKE_ENGINE_DETACH=str(pid_file)) as server:
        detached = int(pid_file.read_text())
        assert _alive(detached) and os.getpgid(detached) != server.proc.pid  # out of the group
    wait_until(lambda: not _alive(detached), 10, "the detached child gone")
    note("hangs", "an engine child that detached itself (setsid)", hung=int(_alive(detached)))
    assert server.detached == (detached,)


def test_the_reaper_kills_a_detached_child_when_the_worker_dies(tmp_path: Path) -> None:
    pid_file = tmp_path / "detached.pid"
    server = _server(tmp_path, FAKE_ENGINE_DETACH=str(pid_file))
    server.start()
    try:
        server.wait_ready()
        detached = int(pid_file.read_text())
        assert server._guard_fd is not None
        os.close(server._guard_fd)  # the worker's end of the guard pipe: as if it died (kill -9)
        server._guard_fd = None
        wait_until(lambda: not _alive(detached) and not _alive(server.proc.pid), 30, "the reaper's kill")
    finally:
        server.stop()
    assert not _alive(detached)


def test_a_chatty_server_log_is_capped_head_and_tail_kept(tmp_path: Path) -> None:
    with _server(tmp_path, FAKE_ENGINE_LOG_MB="12") as server:
        time.sleep(0.2)
    data = server.log_path.read_bytes()
    assert len(data) <= MAX_LOG_BYTES + 200, len(data)
    assert data.startswith(b"non-default args")  # the head: how it was started
    assert b"bytes of this log left out" in data[LOG_HEAD_BYTES - 10 : LOG_HEAD_BYTES + 200]
    assert server.api_key.encode() not in data
