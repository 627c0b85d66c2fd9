"""The base of every JSON output's model (``OutputModel``): every key named, frozen, and its timestamps
in UTC.

One model per output: the record the read side builds is the model whose dump is the JSON and whose
JSON Schema ships in ``results/schemas/`` (``dump``, ``best``, ``policy``: ``results.serialize``; the
deploy answer: ``results.deploy``; ``status``: ``results.standing``; the GPU time split:
``results.cost``). A frozen dataclass of a floor below (``analysis.schedule.PolicyRange``,
``analysis.gains.LevelGain``) is a field type as it is: pydantic derives its schema, under the
config of the model that holds it.

The models refuse a key they do not name (``extra="forbid"``: a typo in the code fails at once); the
shipped schemas allow keys they do not name (``results.schemas``): docs/json.md's policy adds keys
within a version, and a consumer validating against the schema of its version must not break on them.
A key with a default (one added within a version) is optional in the schema, so a document written
before it was added still validates; ``schema_version`` is always required.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict


def utc(moment: datetime) -> datetime:
    """``moment`` in UTC, with its offset. A naive time is local time (Optuna records
    ``datetime.now()``), as ``datetime.astimezone`` reads it."""
    return moment.astimezone(UTC)


#: a timestamp of a JSON output: in UTC, written ISO 8601 with its offset (``2026-12-05T20:26:26Z``),
#: an RFC 3339 ``date-time`` for a format-checking validator
Timestamp = Annotated[datetime, AfterValidator(utc)]


class OutputModel(BaseModel):
    """A JSON output's record: every key named here, no other; immutable once built."""

    model_config = ConfigDict(frozen=True, extra="forbid")
