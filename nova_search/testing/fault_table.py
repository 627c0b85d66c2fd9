"""The fault-injection suite's table (issue 40): what each fault test measured, by family.

Each test of the ``faults`` tier (and the fleet and PostgreSQL fault tests beside it) calls ``note``
with what it measured, just before it asserts it; when ``NOVA_FAULT_TABLE`` names a file, the row is
appended there as one JSON line (pytest-xdist workers append to the same file), else nothing is
written. A test that fails its assertion has still written its row, so the table shows the failure.

    NOVA_FAULT_TABLE=/tmp/faults.jsonl bash scripts/test.sh --all
    .venv/bin/python -m nova_search.testing.fault_table /tmp/faults.jsonl

prints one Markdown table: per family, the scenarios run, trials lost, duplicate configurations among
concurrent workers, workers hung, planted secrets found, injected commands or documents, and hostile
inputs refused (exit 2 within 5 s, nothing written) of those tried."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from pathlib import Path

#: the figures a row may carry, in the table's column order, and their column titles
FIGURES = {
    "lost": "trials lost",
    "duplicates": "duplicate configurations",
    "hung": "workers hung",
    "secrets": "secrets found",
    "injected": "injected commands or documents",
    "refused": "hostile inputs refused",
}
#: the families in the order of issue 40's findings
FAMILIES = (
    "injection",
    "secrets",
    "concurrent draws",
    "connections",
    "hangs",
    "spec reader and create",
    "host failures",
    "retries",
    "database faults",
    "fleet",
)


def note(family: str, scenario: str, *, tried: int | None = None, **figures: int) -> None:
    """Append one row (``family``, ``scenario``, the figures measured) to ``$NOVA_FAULT_TABLE`` when it
    is set. ``refused`` counts hostile inputs refused of ``tried``."""
    path = os.environ.get("NOVA_FAULT_TABLE")
    if not path:
        return
    unknown = set(figures) - set(FIGURES)
    if family not in FAMILIES or unknown:
        raise ValueError(f"fault table: family {family!r} or figures {sorted(unknown)} not known")
    row = {"family": family, "scenario": scenario, "tried": tried, **figures}
    with open(path, "a", encoding="utf-8") as f:  # one write of one line: appends do not interleave
        f.write(json.dumps(row) + "\n")


def table(rows: list[dict]) -> str:
    """The Markdown table: one line per family, each figure summed over its scenarios ("-" when no
    scenario of the family measures it), then a total line."""
    by_family: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        by_family[row["family"]].append(row)
    head = ["family", "scenarios", *FIGURES.values()]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]

    def cells(group: list[dict]) -> list[str]:
        out = [str(len(group))]
        for key in FIGURES:
            got = [r[key] for r in group if r.get(key) is not None]
            if not got:
                out.append("-")
            elif key == "refused":
                tried = sum(r["tried"] or 0 for r in group if r.get(key) is not None)
                out.append(f"{sum(got)} of {tried}")
            else:
                out.append(str(sum(got)))
        return out

    for family in sorted(by_family, key=lambda f: FAMILIES.index(f)):
        lines.append("| " + " | ".join([family, *cells(by_family[family])]) + " |")
    lines.append("| " + " | ".join(["**all**", *cells(rows)]) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m nova_search.testing.fault_table", description=__doc__.split("\n")[0]
    )
    p.add_argument("rows", type=Path, help="the file NOVA_FAULT_TABLE named during the test run")
    p.add_argument("--scenarios", action="store_true", help="also list every scenario's row")
    args = p.parse_args(argv)
    rows = [json.loads(line) for line in args.rows.read_text().splitlines() if line.strip()]
    if not rows:
        print(f"{args.rows}: no rows (was NOVA_FAULT_TABLE set for the test run?)", file=sys.stderr)
        return 1
    print(table(rows))
    if args.scenarios:
        for row in sorted(rows, key=lambda r: (FAMILIES.index(r["family"]), r["scenario"])):
            figures = ", ".join(f"{k} {row[k]}" for k in FIGURES if row.get(k) is not None)
            print(f"- {row['family']}: {row['scenario']}: {figures}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
