"""The model of the worker's event stream (``--log-format json``, docs/events.md): one JSON object a
line, each an event of its kind (``event``), with the keys every event has. ``report.progress``
writes them (``JsonReporter``); its schema ships as ``events.schema.json``, one line's schema, so a
consumer checks each line against it."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, RootModel

from nova_search.results.model import OutputModel, Timestamp

#: the event stream's version: bumped when a field changes meaning or goes (adding one does not)
EVENTS_SCHEMA_VERSION = 1


class EventWorker(OutputModel):
    """The worker process, as ``status`` names it."""

    host: str
    pid: int


class EventBudget(OutputModel):
    """The study's budget as the worker saw it when it asked the trial (null: not seen yet)."""

    used: int | None
    total: int | None
    refused: int | None


class _Event(OutputModel):
    schema_version: Literal[1] = EVENTS_SCHEMA_VERSION
    #: when it happened, UTC, ISO 8601 with milliseconds and the offset
    time: Timestamp
    study: str
    worker: EventWorker


class TrialStarted(_Event):
    event: Literal["trial_started"]
    number: int
    #: the configuration: every knob of EngineConfig, null where unset
    params: dict[str, Any]
    budget: EventBudget


class LevelMeasured(_Event):
    event: Literal["level_measured"]
    number: int
    #: the concurrency
    level: int
    #: every metric of the level (LevelResult's fields); a value that is not a finite number is null
    values: dict[str, Any]


class TrialEnded(_Event):
    event: Literal["trial_ended"]
    number: int
    state: Literal["COMPLETE", "PRUNED", "FAIL"]
    #: the objective values in the spec's order; null unless COMPLETE
    values: list[float | None] | None
    feasible: bool
    #: false: refused by the compatibility table before launch (not counted toward the budget)
    launched: bool
    reason: str | None
    detail: str


class WorkerWaiting(_Event):
    event: Literal["worker_waiting"]
    #: trials still running elsewhere while this worker's budget is used up
    running: int


class WorkerExited(_Event):
    event: Literal["worker_exited"]
    #: how many trials this worker ran
    trials: int


class WorkerEvent(RootModel[Annotated[
    TrialStarted | LevelMeasured | TrialEnded | WorkerWaiting | WorkerExited, Field(discriminator="event")
]]):  # fmt: skip
    """One line of ``--log-format json``: an event of one of the kinds above."""
