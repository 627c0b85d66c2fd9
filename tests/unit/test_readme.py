"""The README stays true: its spec reference is the one the models generate, its links stay inside
the repository and resolve, its table of contents points at real sections, and it names every
command the CLI has."""

from __future__ import annotations

import re

import typer.main

from nova_search.cli import app
from nova_search.spec.reference import block, current_in
from tests.support import REPO

README = (REPO / "README.md").read_text()


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_the_spec_reference_is_the_generated_one():
    assert current_in(README) == block(), "stale: run python -m nova_search.spec.reference --write README.md"


def test_the_spec_reference_names_every_field_the_validator_can_report():
    generated = block()
    for path in ("engine.env", "space.max_num_seqs", "workload.prompt_format", "sweep.repeats", "stages"):
        assert f"| `{path}` |" in generated, path
    assert "## Spec reference" in README  # the validator's "unknown field" message points here


def test_links_stay_inside_the_repository_and_resolve():
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    for target in links:
        assert not target.startswith(("http://", "https://")), f"a link outside the repository: {target}"
        resolved = (REPO / target).resolve()
        assert resolved.is_relative_to(REPO.resolve()), f"a link outside the repository: {target}"
        assert resolved.exists(), f"a link to nothing: {target}"
    assert "../" not in README  # not even as text: a reader of a clone has nothing above it


def test_the_contents_point_at_real_sections():
    headings = {_anchor(h) for h in re.findall(r"^## (.+)$", README, flags=re.M)}
    contents = re.findall(r"^- \[[^\]]+\]\(#([^)]+)\)", README, flags=re.M)
    assert len(contents) >= 10
    for anchor in contents:
        assert anchor in headings, anchor


def test_every_command_is_in_the_commands_section():
    section = README.split("## Commands", 1)[1].split("\n## ", 1)[0]
    group = typer.main.get_group(app)
    for name in group.commands:
        assert f"nova-search {name}" in section, name


def test_the_two_commands_exist_and_ci_runs_the_test_command():
    section = README.split("## Two commands", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"^bash (scripts/\S+\.sh)", section, flags=re.M)
    assert commands == ["scripts/demo.sh", "scripts/test.sh"]
    for script in commands:
        assert (REPO / script).exists()
    assert "bash scripts/test.sh" in (REPO / ".ci" / "run").read_text()
