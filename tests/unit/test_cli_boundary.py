"""The command line's one error boundary and its order: a ``NovaError`` raised inside any command (or any
``db`` subcommand) ends as ``error: <message>`` on stderr and its type's exit code (``errors.ExitCode``:
2 bad input, 4 nothing qualifies, 5 storage, 1 anything else), never a traceback; and ``--help`` lists
the commands in the order a user meets them."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from typer.models import CommandInfo
from typer.testing import CliRunner

import nova_search.cli as cli
from nova_search.cli._common import COMMAND_ORDER, NovaGroup, app
from nova_search.errors import (
    EngineError,
    InputError,
    NothingQualifies,
    NovaError,
    SpecError,
    StorageError,
    StudyError,
)

#: set up -> run -> watch -> read the results -> deploy -> tools
WORKFLOW = [
    "validate",
    "create",
    "run",
    "worker",
    "node",
    "status",
    "dashboard",
    "notes",
    "best",
    "policy",
    "report",
    "dump",
    "export",
    "bench",
    "db",
    "tiny-model",
    "trained-model",
]

CODES = [
    (SpecError("bad [x] input"), 2),
    (InputError("--trial [x]"), 2),
    (StudyError("no study [/x]"), 2),
    (NothingQualifies("none [x]"), 4),
    (StorageError("down [/x]"), 5),
    (EngineError("e"), 1),
    (NovaError("e"), 1),
]


def _group() -> NovaGroup:
    group = typer.main.get_command(app)
    assert isinstance(group, NovaGroup)
    return group


def _commands(
    typer_app: typer.Typer, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], CommandInfo]]:
    """Every command of the app, sub-apps' (``db``) included, with the words that invoke it."""
    for info in typer_app.registered_commands:
        assert info.callback is not None
        yield (*path, info.name or typer.main.get_command_name(info.callback.__name__)), info
    for group in typer_app.registered_groups:
        assert group.typer_instance is not None and group.name
        yield from _commands(group.typer_instance, (*path, group.name))


def test_help_lists_the_commands_in_the_workflow_order() -> None:
    group = _group()
    assert list(COMMAND_ORDER) == WORKFLOW
    assert set(group.commands) == set(WORKFLOW), "a command is missing from COMMAND_ORDER (or gone)"
    assert group.list_commands(typer.Context(group)) == WORKFLOW
    out = CliRunner().invoke(app, ["--help"], terminal_width=200).output
    listed = [m for m in re.findall(r"^\W*([a-z][a-z-]+)\s{2,}", out, flags=re.M) if m in WORKFLOW]
    assert listed == WORKFLOW, out


def test_a_command_missing_from_the_order_is_still_listed_last() -> None:
    group = _group()
    extra = typer.Typer()
    extra.command("zz-new")(lambda: None)
    group.add_command(typer.main.get_command(extra), "zz-new")
    assert group.list_commands(typer.Context(group)) == [*WORKFLOW, "zz-new"]


@pytest.mark.parametrize(
    ("error", "code"), CODES, ids=["spec", "input", "study", "nothing", "storage", "engine", "nova"]
)
def test_a_nova_error_inside_any_command_exits_with_its_code_and_no_traceback(
    error: NovaError, code: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    commands = list(_commands(app))
    top = {path[0] for path, _ in commands}
    assert top == set(WORKFLOW) and ("db", "upgrade") in {path for path, _ in commands}

    def boom() -> None:
        raise error

    for path, info in commands:  # each command, its options gone, raising from its body
        monkeypatch.setattr(info, "name", path[-1])  # a name typer took from the callback's stays
        monkeypatch.setattr(info, "callback", boom)
    for path, _ in commands:
        result = CliRunner().invoke(app, list(path))
        assert result.exit_code == code, (path, result.output)
        assert isinstance(result.exception, SystemExit), (path, result.exception)
        assert result.stderr == f"error: {error}\n", path  # as written: brackets kept, no markup
        assert "Traceback" not in result.output


def test_the_real_commands_raise_into_the_boundary(tmp_path: Path) -> None:
    """No command catches its own errors: a bad --format (2), a missing database file (5), an absent
    spec (2)."""
    url = f"sqlite:///{tmp_path / 'none.db'}"
    runner = CliRunner()
    bad = runner.invoke(app, ["best", "s", "--format", "nope", "--storage", url])
    assert bad.exit_code == 2 and bad.stderr.startswith("error: --format 'nope': valid values are json")
    missing = runner.invoke(app, ["status", "no-such-study", "--storage", url])
    assert missing.exit_code == 5 and missing.stderr.startswith("error: "), missing.output
    assert isinstance(missing.exception, SystemExit) and "Traceback" not in missing.output
    spec = runner.invoke(app, ["validate", str(tmp_path / "absent.yaml")])
    assert spec.exit_code == 2 and spec.stderr.startswith("error: "), spec.output


def test_main_exits_with_the_boundary_s_code(monkeypatch: pytest.MonkeyPatch, capsys, tmp_path: Path) -> None:
    monkeypatch.setattr(sys, "argv", ["nova-search", "validate", str(tmp_path / "absent.yaml")])
    with pytest.raises(SystemExit) as exit_:
        cli.main()
    assert exit_.value.code == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_no_command_wraps_its_calls_or_reports_its_own_errors() -> None:
    import nova_search.cli._common as common

    assert not hasattr(common, "guard")
    for module in ("work", "read", "make"):
        text = (Path(cli.__file__).parent / f"{module}.py").read_text()
        assert "guard(" not in text and "fail(" not in text, module
