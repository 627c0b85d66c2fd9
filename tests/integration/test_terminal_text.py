"""Stored and engine-reported text never steers the terminal (issue 53): a study that holds control
characters where the spec now refuses them (an older study; an engine's own version string and error
message, which nova does not write) is read by ``status``, ``best --format argv``, ``policy`` and a
refused command's error line: every terminal escape (ESC, an OSC title sequence, C1) and
bidirectional override reaches the terminal escaped (``\\x1b``, ``\\u202e``), never raw."""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest

from nova_search import schema
from nova_search.knobs import EngineConfig
from nova_search.search import lifecycle as nova_study
from nova_search.testing.specs import fake_spec
from tests.support.builders import level
from tests.support.cli import nova

pytestmark = pytest.mark.faults

ESC = "\x1b]0;owned\x07\x1b[2J"  # set the window title, clear the screen
RLO = "\u202e"  # right-to-left override
C1 = "\x9b"  # a one-byte CSI


def _hostile_study(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'study.db'}"
    study = nova_study.create(fake_spec(2, name="t"), url, "t")
    argv = ["vllm", "serve", f"fake{RLO}model", "--served-model-name", f"x{ESC}", "--max-num-seqs", "8",
            f"--odd{C1}", "--host", "127.0.0.1", "--port", "9"]  # fmt: skip
    attrs = {
        **schema.ARGV.item(tuple(argv)),
        **schema.LEVELS.item((level(1, 120, 9), level(4, 500, 30))),
        **schema.CONFIG.item(EngineConfig(max_num_seqs=8)),
        **schema.ENGINE_VERSION.item(f"0.11{ESC}"),
        **schema.WORKER.item(schema.WorkerTag(f"node{RLO}a", (0,), 1)),
        **schema.ROLE.item("search"),
    }
    study.add_trial(
        optuna.trial.create_trial(
            params={}, distributions={}, values=[500.0, 30.0], user_attrs=json.loads(json.dumps(attrs))
        )
    )
    failed = {**schema.REASON.item("crash"), **schema.MESSAGE.item(f"engine said {ESC}{RLO}{C1} and died")}
    study.add_trial(optuna.trial.create_trial(state=optuna.trial.TrialState.FAIL, user_attrs=failed))
    return url


def _raw(text: str) -> list[str]:
    return [c for c in ("\x1b", "\x07", RLO, C1) if c in text]


def test_stored_control_characters_reach_the_terminal_escaped(tmp_path: Path) -> None:
    url = _hostile_study(tmp_path)
    outputs = {
        "status": nova("status", "t", "--storage", url),
        "best argv": nova("best", "t", "--storage", url, "--format", "argv"),
        "policy": nova("policy", "t", "--storage", url),
        "export": nova("export", "t", "--storage", url, "--as-measured"),
        "best yaml": nova("best", "t", "--storage", url, "--format", "yaml"),
        "dump csv": nova("dump", "t", "--storage", url, "--format", "csv"),
    }
    for name, r in outputs.items():
        assert r.returncode == 0, (name, r.stderr[-2000:])
        assert _raw(r.stdout) == [] and _raw(r.stderr) == [], (name, r.stdout[-2000:], r.stderr[-2000:])
    assert (
        "\\x1b]0;owned\\x07" in outputs["best argv"].stdout
        and "fake\\u202emodel" in outputs["best argv"].stdout
    )
    assert "\\x1b" in outputs["status"].stdout  # the engine's version, the worker's host: shown, escaped
    assert "node\\u202ea" in outputs["status"].stdout
