"""Messages are text, not rich markup: an error that quotes ``[vllm, serve]`` keeps it, one that quotes
``[/x]`` is printed instead of raising MarkupError, and a FAIL line keeps the engine's ``[rank0]:``."""

from __future__ import annotations

import io

import pytest
import typer
from rich.console import Console

from nova_search.cli._common import fail
from nova_search.errors import EngineError, SpecError
from nova_search.report.progress import RichReporter
from nova_search.trial.context import TrialEnd

BRACKETS = "give engine.command (e.g. [vllm, serve]); name '[/x]' and [bold]x"


@pytest.mark.parametrize(("error", "code"), [(SpecError, 2), (EngineError, 1)])
def test_an_error_is_printed_as_written(error, code, capsys) -> None:
    with pytest.raises(typer.Exit) as exit_:
        fail(error(BRACKETS))
    assert exit_.value.exit_code == code
    assert capsys.readouterr().err.strip() == f"error: {BRACKETS}"


def test_trial_lines_keep_brackets() -> None:
    out = io.StringIO()
    console = Console(file=out, width=400, log_path=False, log_time=False, color_system=None)
    with RichReporter(console, total=2) as reporter:
        reporter.trial_started(0, "kv_cache_dtype=[auto]")
        reporter.trial_finished(TrialEnd(0, "FAIL", "server exited 1: [rank0]: CUDA error; [/x]"))
    lines = [line.rstrip() for line in out.getvalue().splitlines()]
    assert "trial 0: kv_cache_dtype=[auto]" in lines
    assert any(
        line.startswith("trial 0 FAIL in ") and line.endswith("s: server exited 1: [rank0]: CUDA error; [/x]")
        for line in lines
    ), lines
