"""The fault-injection table (nova_search/testing/fault_table.py): rows appended only when asked, summed by
family in the findings' order, a figure no scenario measured shown as "-"."""

from __future__ import annotations

import json

import pytest

from nova_search.testing.fault_table import main, note, table


def test_rows_are_written_only_when_the_variable_names_a_file(tmp_path, monkeypatch):
    path = tmp_path / "faults.jsonl"
    monkeypatch.delenv("NOVA_FAULT_TABLE", raising=False)
    note("fleet", "8 workers", lost=0)
    assert not path.exists()
    monkeypatch.setenv("NOVA_FAULT_TABLE", str(path))
    note("fleet", "8 workers", lost=0, duplicates=1, hung=0)
    note("secrets", "40 hostile inputs", refused=39, tried=40)
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    assert rows[0] == {
        "family": "fleet",
        "scenario": "8 workers",
        "tried": None,
        "lost": 0,
        "duplicates": 1,
        "hung": 0,
    }
    with pytest.raises(ValueError, match="figures"):
        note("fleet", "x", lots=1)
    with pytest.raises(ValueError, match="family"):
        note("no such family", "x")


def test_the_table_sums_by_family_in_the_findings_order(tmp_path, capsys):
    rows = [
        {"family": "fleet", "scenario": "a", "tried": None, "lost": 0, "duplicates": 1, "hung": 0},
        {"family": "secrets", "scenario": "b", "tried": 40, "refused": 39, "secrets": 0},
        {"family": "secrets", "scenario": "c", "tried": 4, "refused": 4},
    ]
    lines = table(rows).splitlines()
    assert lines[0].startswith("| family | scenarios | trials lost | duplicate configurations |")
    assert lines[2] == "| secrets | 2 | - | - | - | 0 | - | 43 of 44 |"
    assert lines[3] == "| fleet | 1 | 0 | 1 | 0 | - | - | - |"
    assert lines[4] == "| **all** | 3 | 0 | 1 | 0 | 0 | - | 43 of 44 |"
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main([str(path), "--scenarios"]) == 0
    assert "- secrets: b: secrets 0, refused 39" in capsys.readouterr().out
    path.write_text("")
    assert main([str(path)]) == 1
