"""The command line. Thin: each command parses options, calls one function and raises what goes wrong;
the app's group (``_common.NovaGroup``) is the only place that turns a ``NovaError`` into a message and
an exit code (2: bad input, 1: anything else), and it lists the commands in the order of the workflow.
``work`` holds the commands that run a study, ``read`` those that read one, ``check`` those that check
and store nothing (``validate`` a spec, ``bench`` a running server), ``make`` those that make the local
models. ``main`` adds what the group cannot see: an interrupt exits 130."""

from __future__ import annotations

import sys
from typing import NoReturn

from nova_search.cli import check, make, read, work  # noqa: F401 - registers the commands on ``app``
from nova_search.cli._common import app
from nova_search.errors import ExitCode

#: the exit code of an interrupted command (130, the shell's); ``worker.node`` uses the same one, and
#: importing it here would load the worker's stack (half a second) into every command
INTERRUPTED = int(ExitCode.INTERRUPTED)

__all__ = ["app", "main"]


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        _exit_interrupted()
    except SystemExit as e:
        if e.code == INTERRUPTED:
            _exit_interrupted()
        raise


def _exit_interrupted() -> NoReturn:
    """Exit 130, the shell's code for an interrupt, after the interrupt was handled.

    CPython 3.11 records a KeyboardInterrupt that propagates out of any ``exec``/``eval`` of a string as
    unhandled, even when an outer ``except`` catches it, and ``python -m`` (how the node launcher starts
    its workers) checks that record after the interpreter finalizes: the process then kills itself with
    SIGINT (exit -2) instead of exiting 130. A SIGTERM
    lands as a KeyboardInterrupt anywhere, inside a lazy import's generated dataclass code too (seen in
    the node launcher's test, about one run in twenty). The next ``exec`` of a string resets the record,
    so one is run here."""
    exec("pass")
    sys.exit(INTERRUPTED)


if __name__ == "__main__":
    main()
