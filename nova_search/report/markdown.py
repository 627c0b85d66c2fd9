"""Markdown pieces shared by the dashboard notes and the verdict text."""

from __future__ import annotations

from collections.abc import Sequence


def _cell(text: str) -> str:
    """A cell's text kept inside its cell: a pipe would end it, a newline the row."""
    return text.replace("|", "\\|").replace("\n", " ")


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], text: Sequence[str] = ()) -> str:
    """A markdown table; columns named in ``text`` are left-aligned, the others (numbers) right."""
    align = "|".join(":---" if h in text else "---:" for h in headers)
    lines = ["| " + " | ".join(headers) + " |", "|" + align + "|"]
    lines += ["| " + " | ".join(_cell(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)
