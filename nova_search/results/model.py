"""The base of every JSON output's model (``OutputModel``): every key named, no other, and frozen.

One model per output: the record the read side builds is the model whose dump is the JSON and whose
JSON Schema ships in ``results/schemas/`` (``dump``, ``best``, ``policy``: ``results.serialize``; the
deploy answer: ``results.deploy``; ``status``: ``results.standing``; the GPU time split:
``results.cost``). A frozen dataclass of a floor below (``analysis.schedule.PolicyRange``,
``analysis.gains.LevelGain``) is a field type as it is: pydantic derives its schema, under the
config of the model that holds it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class OutputModel(BaseModel):
    """A JSON output's record: every key named here, no other; immutable once built."""

    model_config = ConfigDict(frozen=True, extra="forbid")
