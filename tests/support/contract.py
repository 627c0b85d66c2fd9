"""The JSON contract checked as an automation user checks it: ``check-jsonschema`` (format checks on:
a timestamp must be an RFC 3339 ``date-time``, with its offset) on the document a command printed, and
the same validator in-process (its format checker) for records built in memory."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
from check_jsonschema.formats import FormatOptions, make_format_checker
from check_jsonschema.regex_variants import RegexImplementation, RegexVariantName

from nova_search.results.schemas import SCHEMA_DIR, load

#: the check-jsonschema command of this environment
CHECK_JSONSCHEMA = Path(sys.executable).parent / "check-jsonschema"


def format_checker() -> jsonschema.FormatChecker:
    """check-jsonschema's format checker (date-time checked, unlike jsonschema's own without extras)."""
    checker = make_format_checker(FormatOptions(regex_impl=RegexImplementation(RegexVariantName.python)))
    assert checker is not None and "date-time" in checker.checkers
    return checker


def validate(doc: Any, name: str) -> None:
    """``doc`` (parsed JSON) against the shipped schema ``name``, formats checked; raises
    jsonschema.ValidationError naming what fails."""
    jsonschema.Draft202012Validator(load(name), format_checker=format_checker()).validate(doc)


def check_files(name: str, *files: Path) -> None:
    """Run ``check-jsonschema --schemafile <name>.schema.json FILES`` (formats checked, its default) and
    fail with its output unless every file validates."""
    r = subprocess.run(
        [str(CHECK_JSONSCHEMA), "--schemafile", str(SCHEMA_DIR / f"{name}.schema.json"), *map(str, files)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, f"check-jsonschema {name}: {r.stdout[-3000:]}{r.stderr[-3000:]}"


def check_text(name: str, text: str, folder: Path, label: str) -> dict[str, Any]:
    """``text`` (what a command printed) written to ``folder/label.json`` and checked by
    ``check-jsonschema`` against schema ``name``; returns it parsed."""
    path = folder / f"{label}.json"
    path.write_text(text)
    check_files(name, path)
    return json.loads(text)
