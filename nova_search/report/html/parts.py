"""The parts a report section is made of, as the templates draw them: a paragraph, a note on what is
missing, a table, a figure, a heading, a command, a line with inline code (``Part``), and a section
(``Section``: a title and its parts). Every text is escaped by the templates; only a figure's plotly
markup (``figure_div``) is trusted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio
from markupsafe import Markup


def _fmt(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, tuple | list):
        return ", ".join(_fmt(x) for x in v)
    return str(v)


# ---------------------------------------------------------------- a section's parts (drawn by the templates)


@dataclass(frozen=True)
class Part:
    #: which template macro draws it: p, missing, table, figure, h3, code, pre
    kind: str
    text: str = ""
    #: a table's header cells and rows of (text, is_text) cells, and its CSS class
    headers: tuple[str, ...] = ()
    rows: tuple[tuple[tuple[str, bool], ...], ...] = ()
    cls: str = ""
    #: a figure's plotly div (trusted: plotly's own markup)
    html: Markup = Markup("")
    #: a paragraph with inline code: text, then code, then after
    code: str = ""
    after: str = ""


@dataclass(frozen=True)
class Section:
    title: str
    parts: tuple[Part, ...]
    #: the section element's id, where a reader (or a test) looks for it
    id: str = ""


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], cls: str = "") -> Part:
    """A table part; numbers to 4 significant digits, None as a dash, text cells left-aligned."""
    cells = tuple(tuple((_fmt(v), isinstance(v, str)) for v in row) for row in rows)
    return Part("table", headers=tuple(headers), rows=cells, cls=cls)


def paragraph(text: str) -> Part:
    """A paragraph of plain text."""
    return Part("p", text=text)


def missing_note(text: str) -> Part:
    """A note on what is missing (drawn so that it stands out)."""
    return Part("missing", text=text)


def figure_div(fig: go.Figure) -> Part:
    """A figure as plotly's own div (plotly.js is inlined once, in the page's head)."""
    fig.update_layout(template="plotly_white", margin={"l": 60, "r": 20, "t": 50, "b": 50})
    html = pio.to_html(fig, full_html=False, include_plotlyjs=False, config={"displaylogo": False})
    return Part("figure", html=Markup(html))  # noqa: S704 - plotly's own markup, no study text in it unescaped
