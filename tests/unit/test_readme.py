"""The README and docs/ stay true to the code: the spec reference page is the one the models generate,
links stay inside the repository and land on real files and headings, no page names a file the
repository does not have, the commands page names every command the CLI has, and the tests the safety
page cites exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer.main

from nova_search.cli import app
from nova_search.errors import SpecError
from nova_search.spec.reader import parse_spec
from nova_search.spec.reference_page import PAGE, block, current_in
from tests.support import REPO

README = REPO / "README.md"
DOCS = sorted((REPO / "docs").rglob("*.md"))
#: every page a reader of a clone is pointed at
PAGES = [README, REPO / "ARCHITECTURE.md", *DOCS]


def _text(page: Path) -> str:
    return page.read_text()


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", _text(page), flags=re.S)  # a '#' comment in a code block is no heading
    return {_anchor(h) for h in re.findall(r"^#{1,6} (.+)$", text, flags=re.M)}


def _section(text: str, heading: str) -> str:
    return text.split(f"## {heading}", 1)[1].split("\n## ", 1)[0]


def test_the_docs_exist():
    names = {str(p.relative_to(REPO)) for p in DOCS}
    for name in ("docs/concepts.md", "docs/metrics.md", "docs/commands.md", "docs/spec-reference.md"):
        assert name in names, name
    assert str(PAGE) in names


def test_the_spec_reference_is_the_generated_one():
    assert current_in(_text(REPO / PAGE)) == block(), (
        "stale: run python -m nova_search.spec.reference_page --write"
    )


def test_the_spec_reference_names_every_field_the_validator_can_report():
    generated = block()
    for path in ("engine.env", "space.max_num_seqs", "workload.prompt_format", "sweep.repeats", "stages"):
        assert f"| `{path}` |" in generated, path
    # the validator's "unknown field" message points at the page that lists every field
    with pytest.raises(SpecError) as caught:
        parse_spec({"nope": 1})
    pointed = re.findall(r"[\w/.-]+\.md", str(caught.value))
    assert pointed == [str(PAGE)]
    assert current_in(_text(REPO / pointed[0])) is not None


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_links_stay_inside_the_repository_and_resolve(page: Path):
    text = _text(page)
    for target, anchor in re.findall(r"\]\(([^)#\s]*)(?:#([^)\s]*))?\)", text):
        assert not target.startswith(("http://", "https://")), f"a link outside the repository: {target}"
        resolved = (page.parent / target).resolve() if target else page.resolve()
        assert resolved.is_relative_to(REPO.resolve()), f"a link outside the repository: {target}"
        assert resolved.exists(), f"a link to nothing: {target}"
        if anchor and resolved.suffix == ".md":
            assert anchor in _anchors(resolved), f"a link to no heading: {target}#{anchor}"
    if page == README:
        assert "../" not in text  # not even as text: a reader of a clone has nothing above it


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_page_names_a_file_outside_the_repository(page: Path):
    text = _text(page)
    assert not re.search(r"/work/|\.\./shared|/home/\w", text)
    for name in set(re.findall(r"[\w./-]*[\w-]\.md\b", text)):
        if name.startswith(("http", "www.")):
            continue
        candidates = [page.parent / name, REPO / name, *REPO.glob(f"**/{Path(name).name}")]
        assert any(c.exists() and c.resolve().is_relative_to(REPO.resolve()) for c in candidates), name


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_the_package_paths_the_pages_name_exist(page: Path):
    for path in set(
        re.findall(r"`(nova_search/[\w/.]+|benchmarks/[\w/.-]+\.py|studies/[\w/.-]+\.yaml)`", _text(page))
    ):
        assert (REPO / path).exists(), f"{page.name} names {path}, which the repository does not have"


def test_the_contents_point_at_real_sections():
    contents = re.findall(r"^- \[[^\]]+\]\(#([^)]+)\)", _text(README), flags=re.M)
    assert len(contents) >= 5
    for anchor in contents:
        assert anchor in _anchors(README), anchor


def test_every_command_is_on_the_commands_page():
    page = _text(REPO / "docs" / "commands.md")
    usage = page.split("```bash", 1)[1].split("```", 1)[0]
    group = typer.main.get_group(app)
    for name in group.commands:
        assert f"nova-search {name}" in usage, name
    # and nothing there that the CLI does not have
    for name in re.findall(r"^nova-search ([\w-]+)", usage, flags=re.M):
        assert name in group.commands, name


def test_the_two_commands_exist_and_ci_runs_the_test_command():
    section = _section(_text(README), "Two commands")
    commands = re.findall(r"^bash (scripts/\S+\.sh)", section, flags=re.M)
    assert commands == ["scripts/demo.sh", "scripts/test.sh"]
    for script in commands:
        assert (REPO / script).exists()
    assert "bash scripts/test.sh" in (REPO / ".ci" / "run").read_text()


def test_the_tests_the_safety_page_cites_exist():
    page = _text(REPO / "docs" / "deploy" / "safety.md")
    tests = {p.name: p for p in (REPO / "tests").rglob("test_*.py")}
    cited = re.findall(r"`(?:tests/\w+/)?(test_\w+\.py)(?:::(\w+))?`", page)
    assert len(cited) >= 10  # the table was really read
    for file, function in cited:
        assert file in tests, file
        if function:
            assert re.search(rf"^\s*(async )?def {function}\b", tests[file].read_text(), flags=re.M), (
                f"{file}::{function}"
            )
