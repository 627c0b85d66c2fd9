"""The JSON contract: every JSON output of nova-search, its model, its ``schema_version``, and the JSON
Schema generated from the model, shipped beside this module (``<name>.schema.json``). docs/json.md
lists them with their version policy.

The models of the read side's outputs live with the code that builds them (``results.serialize``:
``dump``, ``best``, ``policy``; ``results.deploy``: the deploy answer stored as ``nova:deploy``);
``status``'s and ``bench``'s are here, wrapping records of the floors above ``results``
(``report.status``, ``measure.metrics``), which is why this package sits on the presentation floor
(ARCHITECTURE.md). ``python -m nova_search.results.schemas --write`` regenerates the files;
``--check`` (and tests/unit/test_json_schemas.py) fails when a shipped file is not current.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from nova_search.report.status import StudyStatus
from nova_search.results.deploy import DEPLOY_SCHEMA_VERSION, DeployAnswer
from nova_search.results.serialize import (
    BEST_SCHEMA_VERSION,
    DUMP_SCHEMA_VERSION,
    BestOutput,
    PolicyOutput,
    StudyDump,
)

SCHEMA_DIR = Path(__file__).parent
STATUS_SCHEMA_VERSION = 1
BENCH_SCHEMA_VERSION = 1


class _Output(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StatusWorker(_Output):
    host: str
    gpus: list[int]
    #: the trial it runs now (a staged study: its key, speculative#3); null when idle
    running_trial: int | str | None
    last_seen: datetime
    trials_finished: int
    pid: int | None
    #: when idle: exited, waiting or idle
    idle_state: str


class StatusBest(_Output):
    """The best value so far of one objective."""

    objective: str
    direction: Literal["maximize", "minimize"]
    value: float
    trial_number: int | str
    gpus: int
    #: a throughput objective per GPU the server held; null for other metrics
    per_gpu: float | None
    #: "projected at acceptance L=2.6" when the trial ran with synthetic acceptance (a projection)
    projected: str | None = None


class GpuHeld(_Output):
    """How long one GPU was held by a trial's server."""

    gpu: int
    seconds: float


class StatusGpuTime(_Output):
    """Where the study's GPU time went (``results.cost.GpuTime``), in seconds."""

    windows: float
    boot: float
    failed_boot: float
    other: float
    front_trials: int
    #: GPU time, or engine time for a study on vLLM's CPU build
    label: str
    held: list[GpuHeld]
    span_s: float
    pauses: int


class StatusOutput(_Output):
    """``nova-search status STUDY --format json``: where a study stands, then what to deploy so far."""

    schema_version: Literal[1] = STATUS_SCHEMA_VERSION
    study_name: str
    #: the storage URL, password masked
    storage: str
    #: trials by state: COMPLETE, RUNNING, WAITING, PRUNED, FAIL
    counts: dict[str, int]
    budget: int | None
    budget_used: int
    workers: list[StatusWorker]
    active_slots: int
    best: list[StatusBest]
    mean_trial_s: float | None
    eta_s: float | None
    eta_note: str
    tuned: str | None
    notes: list[str]
    gpu_time: StatusGpuTime
    #: configurations refused before launch (counted apart from the budget)
    refused: int
    #: trials of the budget still to run; null without a budget
    remaining: int | None
    #: the deploy answer (``policy``'s, with its own schema_version)
    deploy: DeployAnswer


def status_output(status: StudyStatus, answer: DeployAnswer) -> StatusOutput:
    d = asdict(status)
    d["gpu_time"]["held"] = [{"gpu": g, "seconds": s} for g, s in status.gpu_time.held]
    return StatusOutput.model_validate(d | {"remaining": status.remaining, "deploy": answer})


class BenchOutput(_Output):
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
)


def schema_of(output: Output) -> dict[str, Any]:
    """The JSON Schema of an output (draft 2020-12, as pydantic writes it), titled and versioned."""
    schema = output.model.model_json_schema(mode="serialization")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"{output.command} (schema_version {output.version})",
    } | {k: v for k, v in schema.items() if k != "title"}


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
