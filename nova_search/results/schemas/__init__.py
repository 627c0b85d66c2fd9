"""The JSON contract: every JSON output of nova-search, its model, its ``schema_version``, and the JSON
Schema generated from the model, shipped beside this module (``<name>.schema.json``). docs/json.md
lists them with their version policy.

The models of the outputs live with the code that builds them, one model per output
(``results.model``): ``results.serialize``: ``dump``, ``best``, ``policy``; ``results.deploy``: the
deploy answer stored as ``nova:deploy``; ``results.standing``: ``status``. ``bench``'s is here (its levels
are ``measure.metrics`` records or vLLM's keys). ``python -m nova_search.results.schemas --write``
regenerates the files; ``--check`` (and tests/unit/test_json_contract.py) fails when a shipped file is
not current.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from nova_search.results.deploy import DEPLOY_SCHEMA_VERSION, DeployAnswer
from nova_search.results.model import OutputModel
from nova_search.results.schemas.events import EVENTS_SCHEMA_VERSION, WorkerEvent
from nova_search.results.serialize import (
    BEST_SCHEMA_VERSION,
    DUMP_SCHEMA_VERSION,
    BestOutput,
    PolicyOutput,
    StudyDump,
)
from nova_search.results.standing import STATUS_SCHEMA_VERSION, StatusOutput

SCHEMA_DIR = Path(__file__).parent
BENCH_SCHEMA_VERSION = 1


class BenchOutput(OutputModel):
    """``nova-search bench --format json``: the profile of a running server, one entry per level."""

    schema_version: Literal[1] = BENCH_SCHEMA_VERSION
    url: str
    #: the keys of each level: nova (``LevelResult``'s fields, docs/metrics.md) or vllm (the keys of
    #: ``vllm bench serve --save-result``)
    names: Literal["nova", "vllm"]
    levels: list[dict[str, Any]]


@dataclass(frozen=True)
class Output:
    """One JSON output: the command that prints it, its model and version."""

    name: str
    command: str
    model: type[BaseModel]
    version: int

    @property
    def path(self) -> Path:
        return SCHEMA_DIR / f"{self.name}.schema.json"


OUTPUTS = (
    Output("dump", "nova-search dump STUDY", StudyDump, DUMP_SCHEMA_VERSION),
    Output("best", "nova-search best STUDY --format json", BestOutput, BEST_SCHEMA_VERSION),
    Output("status", "nova-search status STUDY --format json", StatusOutput, STATUS_SCHEMA_VERSION),
    Output("policy", "nova-search policy STUDY --format json", PolicyOutput, DEPLOY_SCHEMA_VERSION),
    Output("deploy", "the study attribute nova:deploy (policy --write)", DeployAnswer, DEPLOY_SCHEMA_VERSION),
    Output("bench", "nova-search bench ... --format json", BenchOutput, BENCH_SCHEMA_VERSION),
    Output(
        "events",
        "one line of nova-search run/worker/node --log-format json",
        WorkerEvent,
        EVENTS_SCHEMA_VERSION,
    ),
)


def schema_of(output: Output) -> dict[str, Any]:
    """The JSON Schema of an output (draft 2020-12, as pydantic writes it), titled and versioned:
    ``schema_version`` required and fixed to the output's version (``const``), and keys the model does
    not name allowed (``open_objects``): docs/json.md's version policy adds keys within a version, and
    a consumer that validates against its version's schema must keep working."""
    schema = open_objects(output.model.model_json_schema(mode="serialization"))
    # the document's object: the model's own, or each kind of a union (the events)
    objects = [schema] if "properties" in schema else list(schema.get("$defs", {}).values())
    versioned = [o for o in objects if "schema_version" in o.get("properties", {})]
    if not versioned:
        raise ValueError(f"{output.name}: no schema_version")
    for obj in versioned:
        if obj["properties"]["schema_version"].get("const") != output.version:
            raise ValueError(f"{output.name}: schema_version must be a Literal[{output.version}]")
        obj["required"] = ["schema_version", *(k for k in obj.get("required", ()) if k != "schema_version")]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"{output.command} (schema_version {output.version})",
    } | {k: v for k, v in schema.items() if k != "title"}


def open_objects(schema: Any) -> Any:
    """``schema`` without ``additionalProperties: false`` anywhere (the models' ``extra="forbid"`` is
    for the code that builds them, not for the readers of their JSON); a mapping's value schema
    (``additionalProperties: {...}``) stays."""
    if isinstance(schema, dict):
        return {
            k: open_objects(v) for k, v in schema.items() if not (k == "additionalProperties" and v is False)
        }
    if isinstance(schema, list):
        return [open_objects(v) for v in schema]
    return schema


def rendered(output: Output) -> str:
    return json.dumps(schema_of(output), indent=2, ensure_ascii=False) + "\n"


def stale() -> list[str]:
    """The shipped schema files that are missing or differ from the models."""
    return [o.path.name for o in OUTPUTS if not o.path.exists() or o.path.read_text() != rendered(o)]


def write() -> list[str]:
    """Write every schema file; returns the names written."""
    for o in OUTPUTS:
        o.path.write_text(rendered(o))
    return [o.path.name for o in OUTPUTS]


def load(name: str) -> dict[str, Any]:
    """A shipped schema by output name (``dump``, ``best``, ...)."""
    return json.loads((SCHEMA_DIR / f"{name}.schema.json").read_text())
