"""The report as one self-contained HTML file: ``SECTIONS`` rendered by the Jinja2 templates in
``report/templates`` (autoescaping on: every text is escaped, only plotly's own figure markup is
trusted).

plotly.js is inlined once (in ``<head>``), every figure is a ``plotly.io.to_html(full_html=False,
include_plotlyjs=False)`` div, so the file opens offline. ``write_report`` writes atomically (a
temporary file in the same folder, then ``os.replace``).
"""

from __future__ import annotations

import os
from datetime import datetime
from functools import cache
from pathlib import Path

import jinja2
from markupsafe import Markup
from plotly.offline import get_plotlyjs

from nova_search.files import write_atomic
from nova_search.report.data import ReportData
from nova_search.report.html.sections import SECTIONS

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
h1 { font-size: 1.6em; } h2 { margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th { background: #f3f3f3; } td.text { text-align: left; }
pre { background: #f6f6f6; padding: 0.5em 0.8em; white-space: pre-wrap; word-break: break-all; }
p.missing { color: #8a4b00; background: #fff6e5; padding: 0.4em 0.8em; border-left: 3px solid #e0a030; }
"""


@cache
def _templates() -> jinja2.Environment:
    """The report's templates, shipped in the package (package data), autoescaping always on."""
    return jinja2.Environment(
        loader=jinja2.PackageLoader("nova_search.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def render_html(data: ReportData, *, generated: datetime | None = None) -> str:
    """The whole report as one HTML document (plotly.js inlined once)."""
    generated = generated or datetime.now()
    return (
        _templates()
        .get_template("report.html.j2")
        .render(
            title=f"nova-search report: {data.study_name}",
            stamp=generated.strftime("%Y-%m-%d %H:%M:%S"),
            storage=data.storage,
            css=Markup(_CSS),
            plotlyjs=Markup(get_plotlyjs()),  # noqa: S704 - plotly's own library
            sections=[s for section in SECTIONS if (s := section(data)) is not None],
        )
    )


def write_report(data: ReportData, path: str | os.PathLike[str]) -> Path:
    """Render and write atomically (a crash never leaves a half-written report)."""
    return write_atomic(path, render_html(data))
