"""The JSON contract (issue 38, item 3) and the exit-code table (item 4), on records in memory: every
JSON output carries ``schema_version`` and validates against the JSON Schema the package ships, the
shipped schemas are current, pairs are named records, ``--version`` answers, and ``errors.ExitCode`` is
the one table every exit code comes from and docs/commands.md shows."""

from __future__ import annotations

import io
import json
import re
import sys
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import jsonschema
import pytest
from typer.testing import CliRunner

import nova_search.cli.work as work
from nova_search import __version__
from nova_search.cli._common import app
from nova_search.errors import (
    EngineError,
    ExitCode,
    InputError,
    NothingQualifies,
    NovaError,
    SpecError,
    StorageError,
    StudyError,
)
from nova_search.report.progress import JsonReporter
from nova_search.results import schemas
from nova_search.results.deploy import deploy_answer
from nova_search.results.schemas import OUTPUTS, BenchOutput, load, stale
from nova_search.results.select import best_trials
from nova_search.results.serialize import best_output, dumps_json, policy_dict, study_dict
from nova_search.results.speculation import verdict_of
from nova_search.results.standing import status_output, study_status
from nova_search.schema import WorkerTag
from nova_search.trial.context import TrialEnd
from nova_search.worker.node import INTERRUPTED
from tests.support import REPO
from tests.support.builders import full_report_study, level
from tests.support.contract import validate


def _valid(doc: object, name: str) -> dict:
    """``doc`` as the CLI prints it, checked against the shipped schema with format checks (a timestamp
    is an RFC 3339 date-time, offset included); returns the parsed JSON."""
    parsed = json.loads(dumps_json(doc))
    validate(parsed, name)
    return parsed


def test_the_shipped_schemas_are_current(monkeypatch, capsys) -> None:
    assert stale() == []
    from nova_search.results.schemas.__main__ import main

    monkeypatch.setattr(sys, "argv", ["schemas", "--check"])
    assert main() == 0
    names = {p.name for p in schemas.SCHEMA_DIR.glob("*.schema.json")}
    assert names == {f"{o.name}.schema.json" for o in OUTPUTS}  # no schema left over from a gone output


def _documents(schema: dict) -> list[dict]:
    """The object(s) a document of ``schema`` is: its own, or each kind of a union (the events)."""
    return (
        [schema]
        if "properties" in schema
        else [schema["$defs"][r["$ref"].split("/")[-1]] for r in schema["oneOf"]]
    )


def test_every_schema_requires_its_fixed_schema_version() -> None:
    for o in OUTPUTS:
        schema = load(o.name)
        for doc in _documents(schema):
            assert "schema_version" in doc["required"], o.name
            assert doc["properties"]["schema_version"]["const"] == o.version, o.name
        assert f"schema_version {o.version}" in schema["title"]
    answer = deploy_answer(full_report_study(), verdict_of(full_report_study())).as_json()
    for name in ("deploy", "policy"):  # the deploy answer's version is fixed too, in both its outputs
        with pytest.raises(jsonschema.ValidationError, match="schema_version"):
            validate({k: v for k, v in answer.items() if k != "schema_version"}, name)
        with pytest.raises(jsonschema.ValidationError):
            validate(answer | {"schema_version": 2}, name)


def _objects(schema: object) -> list[dict]:
    """Every object schema inside ``schema``."""
    if isinstance(schema, list):
        return [o for v in schema for o in _objects(v)]
    if not isinstance(schema, dict):
        return []
    here = [schema] if schema.get("type") == "object" else []
    return here + [o for v in schema.values() for o in _objects(v)]


def test_the_schemas_keep_the_version_policy_new_keys_are_allowed() -> None:
    """docs/json.md: a key may be added within a version, so no schema forbids a key it does not name
    (a consumer validating against its version's schema keeps working), at the top or inside."""
    policy = (REPO / "docs" / "json.md").read_text()
    assert "A new key may be added within a version" in policy
    for o in OUTPUTS:
        schema = load(o.name)
        assert all(obj.get("additionalProperties", True) is not False for obj in _objects(schema)), o.name
    results = full_report_study()
    dump = json.loads(dumps_json(study_dict(results)))
    dump["added_later"] = 1
    dump["trials"][0]["added_later"] = {"x": 1}
    validate(dump, "dump")


def test_timestamps_are_utc_with_their_offset() -> None:
    """Optuna records naive local times; every JSON output writes them in UTC with the offset, which a
    format-checking validator takes for an RFC 3339 date-time (a naive one is refused)."""
    results = full_report_study()
    naive = datetime(2026, 12, 5, 20, 26, 26, 925534)
    t0 = replace(results.trials[0], datetime_start=naive, datetime_complete=naive + timedelta(seconds=3))
    results = replace(results, trials=(t0, *results.trials[1:]))
    dump = _valid(study_dict(results), "dump")
    start = datetime.fromisoformat(dump["trials"][0]["datetime_start"])
    assert start.utcoffset() == timedelta(0) and start == naive.astimezone(UTC)
    assert dumps_json({"at": naive}) == json.dumps({"at": naive.astimezone(UTC).isoformat()}, indent=2)
    t0 = replace(t0, worker=WorkerTag(host="node-a", gpus=(0,), pid=1))
    st = study_status(
        replace(results, trials=(t0,)), now=naive + timedelta(seconds=60), alive=lambda h, p: None
    )
    answer = deploy_answer(results, verdict_of(results))
    status = _valid(status_output(st, answer).model_dump(mode="json"), "status")
    (seen,) = status["workers"]
    assert datetime.fromisoformat(seen["last_seen"]) == (naive + timedelta(seconds=3)).astimezone(UTC)
    with pytest.raises(jsonschema.ValidationError, match="date-time"):
        validate(dump | {"trials": [dump["trials"][0] | {"datetime_start": naive.isoformat()}]}, "dump")


def test_every_read_output_validates_against_its_shipped_schema() -> None:
    results = full_report_study()
    verdict = verdict_of(results)
    answer = deploy_answer(results, verdict)

    dump = _valid(study_dict(results), "dump")
    assert dump["schema_version"] == 3 and dump["nova_version"] == __version__
    assert len(dump["trials"]) == len(results.trials)

    best = _valid(best_output(results, best_trials(results), None, []).model_dump(mode="json"), "best")
    assert best["schema_version"] == 1
    assert sorted(t["key"] for t in best["trials"]) == sorted(results.front_keys)

    status = _valid(status_output(study_status(results), answer).model_dump(mode="json"), "status")
    assert status["schema_version"] == 1 and status["deploy"] == answer.as_json()

    policy = _valid(policy_dict(answer, verdict), "policy")
    assert {k: policy[k] for k in answer.as_json()} == answer.as_json()  # the answer, then the verdict
    _valid(answer.as_json(), "deploy")

    # pairs are named: tuned against stock per level, each drafter's verified ranges
    assert policy["tuned_vs_stock"] == [
        {"concurrency": c, "gain_pct": pytest.approx(p)} for c, p in verdict.tuned_vs_stock
    ]
    assert policy["tuned_vs_stock"] and all(
        set(g) == {"concurrency", "gain_pct"} for g in policy["tuned_vs_stock"]
    )
    for d, v in zip(policy["drafters"], verdict.drafters, strict=True):
        assert d["verified_ranges"] == [
            {"min_concurrency": lo, "max_concurrency": hi} for lo, hi in v.verified_ranges
        ]


def test_the_schemas_refuse_what_the_old_shapes_were() -> None:
    results = full_report_study()
    old_best = [t for t in study_dict(results)["trials"]]  # best was a bare list of trials
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(old_best, load("best"))
    dump = study_dict(results)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(dump | {"schema_version": 2}, load("dump"))


def test_bench_json_is_an_object_with_its_levels() -> None:
    out = BenchOutput(url="http://x:8000", names="nova", levels=[level(1).as_dict()]).model_dump(mode="json")
    doc = _valid(out, "bench")
    assert doc["schema_version"] == 1 and doc["levels"][0]["concurrency"] == 1


def test_version_prints_nova_and_optuna() -> None:
    from importlib.metadata import version

    r = CliRunner().invoke(app, ["--version"])
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0] == f"nova-search {__version__}"
    assert f"optuna {version('optuna')}" in lines


# ---------------------------------------------------------------- exit codes


def test_the_exit_code_table_is_one_enum() -> None:
    assert {c.name: int(c) for c in ExitCode} == {
        "OK": 0,
        "FAILED": 1,
        "BAD_INPUT": 2,
        "NOTHING_MEASURED": 3,
        "NOTHING_QUALIFIES": 4,
        "STORAGE": 5,
        "INTERRUPTED": 130,
    }
    # the codes named elsewhere are the table's
    assert work.NOTHING_MEASURED == ExitCode.NOTHING_MEASURED and INTERRUPTED == ExitCode.INTERRUPTED


def test_each_error_type_maps_to_one_code() -> None:
    assert {
        cls.__name__: cls("x").exit_code
        for cls in (NovaError, InputError, SpecError, StudyError, NothingQualifies, StorageError, EngineError)
    } == {
        "NovaError": ExitCode.FAILED,
        "InputError": ExitCode.BAD_INPUT,
        "SpecError": ExitCode.BAD_INPUT,
        "StudyError": ExitCode.BAD_INPUT,
        "NothingQualifies": ExitCode.NOTHING_QUALIFIES,
        "StorageError": ExitCode.STORAGE,
        "EngineError": ExitCode.FAILED,
    }
    # an unknown study is bad input, yet code that catches storage errors still catches it
    assert isinstance(StudyError("x"), StorageError) and not StudyError("x").transient


def test_docs_show_the_table() -> None:
    text = (REPO / "docs" / "commands.md").read_text()
    section = text[text.index("## Exit codes") :]
    rows = dict(re.findall(r"^\| (\d+) \| ([A-Z_]+) \|", section, flags=re.M))
    assert rows == {str(int(c)): c.name for c in ExitCode}


def test_every_event_line_validates_against_the_events_schema() -> None:
    """The worker's event stream (--log-format json): every kind of line, as JsonReporter writes it,
    validates against events.schema.json with format checks (its time is UTC with the offset)."""
    out = io.StringIO()
    r = JsonReporter(out, "s")
    r.budget(1, 4, 0)
    r.trial_started(0, "x", {"max_num_seqs": 8, "speculative": None})
    r.level_measured(0, level(4))
    r.trial_finished(TrialEnd(0, "COMPLETE", "ok", values=(1.5, float("nan")), feasible=True))
    r.trial_finished(TrialEnd(1, "PRUNED", "incompatible: x", reason="incompatible", launched=False))
    r.waiting(2)
    r.exited(2)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [e["event"] for e in lines] == [
        "trial_started", "level_measured", "trial_ended", "trial_ended", "worker_waiting", "worker_exited"
    ]  # fmt: skip
    for line in lines:
        validate(line, "events")
    with pytest.raises(jsonschema.ValidationError):
        validate(lines[0] | {"event": "trial_exploded"}, "events")
