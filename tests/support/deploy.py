"""Checks that every place showing the deploy answer (``results.deploy``) shows the same one: the same
ranges, the same trial per range, the same argv."""

from __future__ import annotations

import html
import re
import shlex
from typing import Any


def ranges_of(answer: dict[str, Any]) -> list[tuple[str, str, list[str]]]:
    """(range label, trial, argv) per range of an answer's JSON."""
    return [(r["label"], r["configuration"]["trial"], list(r["argv"])) for r in answer["ranges"]]


def assert_text_shows(text: str, answer: dict[str, Any], where: str) -> None:
    """``text`` names every range, its trial and its command, in the answer's order; with vLLM's dynamic
    schedule (every range one server, one command) the ranges and trials, then that command once."""
    ranges = ranges_of(answer)
    commands = {shlex.join(argv) for _, _, argv in ranges}
    one = answer.get("schedule") and len(commands) == 1
    pos = 0
    for label, trial, argv in ranges:
        for needle in (label, f"trial {trial}") if one else (label, f"trial {trial}", shlex.join(argv)):
            at = text.find(needle, pos)
            assert at >= 0, f"{where}: {needle!r} missing (or out of order) in:\n{text[:3000]}"
        pos = text.find(f"trial {trial}" if one else shlex.join(argv), pos) + 1
    if one:
        (command,) = commands
        assert text.count(command) == 1 and text.find(command, pos) >= 0, (
            f"{where}: the one server's command:\n{text}"
        )


def report_deploy_section(doc: str) -> str:
    """The report's first section, as text; asserts it is the first and is "What to deploy"."""
    sections = re.findall(r"<section.*?</section>", doc, flags=re.S)
    assert sections and sections[0].startswith('<section id="deploy"><h2>What to deploy</h2>'), sections[:1]
    return html.unescape(re.sub(r"<[^>]+>", "\n", sections[0]))


def note_deploy_section(md: str) -> str:
    """The study note's first section (after its title): "What to deploy"."""
    parts = md.split("\n## ")
    assert parts[1].startswith("What to deploy"), md[:500]
    return parts[1]


def status_tail(text: str) -> str:
    """The end of ``status``: from its "What to deploy" line on, which must be the last block."""
    at = text.rfind("What to deploy:")
    assert at >= 0, text
    return text[at:]
