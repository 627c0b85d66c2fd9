"""An interrupted command exits 130, even when the interrupt first escaped an ``exec`` of a string
(CPython 3.11 then records it as unhandled and, unreset, kills the process with SIGINT at exit). The
record is checked only on ``python -m``'s path, the one the node launcher starts its workers on."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

_RUN_MAIN = """
import nova_search.cli as cli

def app():
{body}

cli.app = app
cli.main()
"""

#: the interrupt escapes an exec of a string (as one in a lazy import's generated dataclass code does)
_INSIDE_EXEC = '    exec("raise KeyboardInterrupt")'
#: the command caught it and exited 130 itself (typer.Exit(130) reaches main as SystemExit(130))
_CAUGHT_THEN_EXIT = """    try:
        exec("raise KeyboardInterrupt")
    except KeyboardInterrupt:
        raise SystemExit(130) from None"""


def _run_module(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "interrupted_main.py").write_text(_RUN_MAIN.format(body=body))
    return subprocess.run(
        [sys.executable, "-m", "interrupted_main"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("body", [_INSIDE_EXEC, _CAUGHT_THEN_EXIT], ids=["escapes", "caught"])
def test_an_interrupt_from_inside_exec_still_exits_130(tmp_path: Path, body: str) -> None:
    run = _run_module(tmp_path, body)
    assert run.returncode == 130, run.stderr


def test_other_exit_codes_pass_through_unchanged(tmp_path: Path) -> None:
    run = _run_module(tmp_path, "    raise SystemExit(2)")
    assert run.returncode == 2, run.stderr
