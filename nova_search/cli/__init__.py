"""The command line. Thin: each command parses options, calls one function, and ``_common.guard`` is
the only place that turns a ``NovaError`` into a message and an exit code (2: bad input, 1: anything
else). ``work`` holds the commands that run a study, ``read`` those that read one, ``models`` those that
make the local models."""

from __future__ import annotations

import sys

from nova_search.cli import models, read, work  # noqa: F401 - registers the commands on ``app``
from nova_search.cli._common import app

__all__ = ["app", "main"]


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
