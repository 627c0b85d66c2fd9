"""The CLI's consoles, made in one place (``make_console``): on a terminal, rich's own (its width, its
wrapping, its live progress display); off one (a log file, ``| tee``, k8s, Slurm or CI logs), no width
limit, nothing wrapped or cut and no colour codes, so that every configuration and command in a log is
whole. rich falls back to 80 columns off a terminal, which cut tables to ``configura…`` and broke
commands mid-line."""

from __future__ import annotations

from datetime import datetime
from typing import IO, Any

from rich.console import Console

#: columns a console off a terminal lays out to: wide enough that no line is ever wrapped or cut
#: (tables measure their content and stay as narrow as it; plain text is printed as written)
LOG_WIDTH = 100_000


class LogConsole(Console):
    """A console that, off a terminal, prints ``log`` lines as ``[time] text``: rich's own log layout
    pads every line to the console's width, which off a terminal is ``LOG_WIDTH``."""

    def log(self, *objects: Any, sep: str = " ", end: str = "\n", **kwargs: Any) -> None:
        if self.is_terminal:
            super().log(*objects, sep=sep, end=end, _stack_offset=2, **kwargs)
            return
        keep = {k: v for k, v in kwargs.items() if k in ("style", "markup", "highlight", "emoji")}
        self.print(f"[{datetime.now():%H:%M:%S}]", *objects, sep=sep, end=end, **keep)


def make_console(*, stderr: bool = False, file: IO[str] | None = None) -> Console:
    """A console for stdout (or stderr, or ``file``): rich's defaults on a terminal; off one, no width
    limit and no wrapping (``LOG_WIDTH``, ``soft_wrap``)."""
    console = LogConsole(stderr=stderr, file=file, log_path=False)
    if not console.is_terminal:
        console = LogConsole(stderr=stderr, file=file, log_path=False, width=LOG_WIDTH, soft_wrap=True)
    return console
