"""Results as plain data: JSON for ``dump``, ``best`` and ``policy``, CSV for spreadsheets and dataframes.

Every JSON output is a pydantic model (``StudyDump``, ``BestOutput``, ``PolicyOutput``; ``status``'s is in
``results.standing``, ``bench``'s in ``results.schemas``), validated as it is built, so its JSON Schema,
generated from the model and shipped in ``results/schemas/``, says what the output holds. One model per
output (``results.model``): a record of a floor below is a field as it is, not copied (``PolicyRange``,
``LevelGain``, ``Tradeoff``; the GPU time split, ``results.cost.GpuSeconds``). Each carries
``schema_version``: a consumer checks it before it reads. The version policy (docs/json.md): a new key
is added within a version; a key removed, renamed, or whose meaning or shape changes bumps it.

``dump`` (``DUMP_SCHEMA_VERSION``): version 3 is described by ``dump.schema.json``: ``worker.pid`` is
always present (null when not recorded), and the dump says which ``nova_version`` wrote it. Version 2
added ``schema_version``, trial ``key``/``stage``/``study``, ``worker`` as ``{host, gpus}`` and
``client_bound_levels``, and ``gpu_time_s`` (``results.cost``: windows, boot, failed_boot, other);
version 1 (before) had none of these.

``best`` (``BEST_SCHEMA_VERSION``): an object, ``{schema_version, study, objective, where, trials}``
(before: a bare list of the trials). ``policy``: the deploy answer (``results.deploy``: its
``schema_version``), then the verdict's details, every pair a named record (``tuned_vs_stock`` as
``{concurrency, gain_pct}``, a verified range as ``{min_concurrency, max_concurrency}``); vLLM's
dynamic schedule stays vLLM's own ``[[min_batch, max_batch, k], ...]``, pasted as is into
``--speculative-config``.

The CSV has one row per trial and measured level: the trial's identity, state, role and configuration
knobs, then the level's concurrency and every ``LevelResult`` metric of it (``metrics.METRIC_NAMES``).
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

from nova_search import __version__
from nova_search.analysis import projection
from nova_search.analysis.gains import LevelGain, Tradeoff
from nova_search.analysis.schedule import PolicyRange
from nova_search.analysis.verdict import DrafterVerdict, Verdict
from nova_search.knobs import KNOBS
from nova_search.measure.metrics import METRIC_NAMES, LevelResult
from nova_search.measure.objectives import Objective
from nova_search.results.capacity_table import CapacityRecord, capacity_record
from nova_search.results.cost import GpuSeconds, gpu_time
from nova_search.results.deploy import DeployAnswer
from nova_search.results.launch import serve_argv
from nova_search.results.model import OutputModel, Timestamp, utc
from nova_search.results.trials import StudyResults, TrialResult

DUMP_SCHEMA_VERSION = 3
BEST_SCHEMA_VERSION = 1

TrialState = Literal["COMPLETE", "RUNNING", "WAITING", "PRUNED", "FAIL"]


class TrialSummary(OutputModel):
    """One trial as ``best`` lists it (and ``dump`` starts each trial with)."""

    number: int
    #: ``3``, or ``speculative#3`` in a staged study
    key: str
    stage: str
    study: str
    state: TrialState
    #: stock, search, baseline, ...
    role: str
    #: every constraint of the spec met
    feasible: bool
    #: by objective name (``output_throughput@best``); null for a trial that did not complete
    values: dict[str, float | None] | None
    params: dict[str, Any]
    #: the vLLM engine configuration (``EngineConfig``: knob name -> value, ``speculative`` as vLLM's
    #: ``--speculative-config``)
    config: dict[str, Any] | None
    #: by constraint name: <= 0 is met (Optuna's convention)
    constraints: dict[str, float]
    #: the launch argv as measured (API key file, host, port included)
    argv: list[str]
    #: ``vllm serve MODEL FLAGS``: the argv without key file, host, port or nova's own flags, as the
    #: worker stores it (``nova:deploy_argv``), whatever interpreter or command ran the trial
    deployable_argv: list[str]
    #: vLLM's version as its server reported it
    engine_version: str | None
    #: levels where the load generator may have set the figures (its CPU was the bottleneck)
    client_bound_levels: list[int]
    #: "projected at acceptance L=2.6": the drafter ran with synthetic acceptance, so every figure of
    #: this trial is a projection at that acceptance, not a measurement of the drafter; null: measured
    projected: str | None = None


class Worker(OutputModel):
    host: str
    gpus: list[int]
    #: the worker's process id; null in trials recorded before it was kept
    pid: int | None = None


class PairedLevel(OutputModel):
    """One level's ABBA pairs: the leader's windows and the trial's, in the order they ran."""

    leader: list[dict[str, float | None]]
    trial: list[dict[str, float | None]]


class PairedRecord(OutputModel):
    """A trial measured again against the slot's leader (``confirm``)."""

    leader: int | None
    park: str
    pairs: int
    stopped: str
    switch_s: float
    #: by concurrency (a JSON key is a string)
    levels: dict[str, PairedLevel]


class TrialRecord(TrialSummary):
    """One trial as ``dump`` writes it: the summary, then everything measured and recorded."""

    levels: list[LevelResult]
    #: by concurrency: each window's headline metrics
    windows: dict[str, list[dict[str, float | None]]]
    #: seconds by phase (boot, windows, ...)
    timing: dict[str, float]
    duration_s: float | None
    datetime_start: Timestamp | None
    datetime_complete: Timestamp | None
    #: why the trial failed or was pruned (oom, crash, ...), and in words
    reason: str | None
    message: str | None
    warnings: list[str]
    worker: Worker | None
    device_name: str | None
    #: the trial this one retries (a dead worker's)
    retry_of: int | None
    paired: PairedRecord | None
    #: the capacity search at the SLO (``spec.capacity``): what it found and every probe; null without
    capacity: CapacityRecord | None = None


class StudyDump(OutputModel):
    """``nova-search dump STUDY``: the whole study."""

    schema_version: Literal[3] = DUMP_SCHEMA_VERSION
    #: the nova-search that wrote this dump
    nova_version: str = __version__
    study: str
    #: the storage URL, password masked
    storage: str
    stages: list[str]
    #: the objectives' names, and each one's direction (same order)
    objectives: list[str]
    directions: list[Literal["maximize", "minimize"]]
    budget: int | None
    budget_used: int
    #: keys of the trials on the Pareto front
    pareto: list[str]
    gpu_time_s: GpuSeconds
    #: the spec the study stores
    spec: dict[str, Any] | None
    trials: list[TrialRecord]


class BestOutput(OutputModel):
    """``nova-search best STUDY --format json``: the best feasible COMPLETE trials, best first."""

    schema_version: Literal[1] = BEST_SCHEMA_VERSION
    study: str
    #: what ranks them: an objective or metric@level, or null for the Pareto front
    objective: str | None
    #: the ``--where`` conditions every listed trial meets, as given (``ttft_p99_ms<=500@32``)
    where: list[str]
    trials: list[TrialSummary]


def trial_summary(trial: TrialResult, objectives: Sequence[Objective] = ()) -> TrialSummary:
    values: dict[str, float] | None = None
    if trial.values is not None:
        names = [o.name for o in objectives] or [f"value{i}" for i in range(len(trial.values))]
        values = dict(zip(names, trial.values, strict=False))
    return TrialSummary(
        number=trial.number,
        key=trial.key,
        stage=trial.stage,
        study=trial.study,
        state=trial.state,  # type: ignore[arg-type]  # validated against TrialState
        role=trial.role,
        feasible=trial.feasible,
        values=values,
        params=trial.params,
        config=trial.config.as_dict() if trial.config else None,
        constraints=trial.constraints,
        argv=list(trial.argv),
        deployable_argv=list(serve_argv(trial.argv)),  # what the worker stored as nova:deploy_argv
        engine_version=trial.engine_version,
        client_bound_levels=list(trial.client_bound_levels),
        projected=projection.label(trial.config),
    )


def trial_dict(trial: TrialResult, objectives: Sequence[Objective] = ()) -> dict[str, Any]:
    """A JSON-ready summary of one trial (``TrialSummary``): key, role, state, values by objective
    name, params, config, constraints, argv and deployable argv, engine version."""
    return trial_summary(trial, objectives).model_dump(mode="json")


def trial_record(trial: TrialResult, objectives: Sequence[Objective] = ()) -> TrialRecord:
    t = trial
    return TrialRecord(
        **dict(trial_summary(t, objectives)),
        levels=list(t.levels),
        windows={str(c): list(ws) for c, ws in t.windows.items()},
        timing=t.timing,
        duration_s=t.duration_s,
        datetime_start=t.datetime_start,
        datetime_complete=t.datetime_complete,
        reason=t.reason,
        message=t.message,
        warnings=list(t.warnings),
        worker=Worker(host=t.worker.host, gpus=list(t.worker.gpus), pid=t.worker.pid) if t.worker else None,
        device_name=t.device_name,
        retry_of=t.retry_of,
        paired=PairedRecord.model_validate(t.paired.as_dict()) if t.paired else None,
        capacity=capacity_record(t),
    )


def study_dump(results: StudyResults) -> StudyDump:
    seconds = gpu_time(results).seconds()
    return StudyDump(
        study=results.study_name,
        storage=results.storage,
        stages=list(results.stages),
        objectives=[o.name for o in results.objectives],
        directions=[o.direction for o in results.objectives],  # type: ignore[misc]
        budget=results.budget,
        budget_used=results.budget_used,
        pareto=list(results.front_keys),
        gpu_time_s=GpuSeconds(**seconds),
        spec=results.spec,
        trials=[trial_record(t, results.objectives) for t in results.trials],
    )


def study_dict(results: StudyResults) -> dict[str, Any]:
    """The whole study as plain data (``nova-search dump``; ``StudyDump``)."""
    return study_dump(results).model_dump(mode="json")


def best_output(
    results: StudyResults, found: Sequence[TrialResult], objective: str | None, where: Sequence[str]
) -> BestOutput:
    return BestOutput(
        study=results.study_name,
        objective=objective,
        where=list(where),
        trials=[trial_summary(t, results.objectives) for t in found],
    )


# ---------------------------------------------------------------- policy: the answer and the verdict


class ConcurrencyRange(OutputModel):
    min_concurrency: int
    max_concurrency: int


class StockGain(OutputModel):
    """Tuned against stock at one level (%), reported apart from every speculative gain."""

    concurrency: int
    gain_pct: float | None


class DrafterRecord(OutputModel):
    """One drafter's verdict against the tuned baseline (``analysis.verdict.DrafterVerdict``)."""

    method: str
    #: accepted, rejected, not_enough_evidence, flagged, ...
    status: str
    trials: list[str]
    per_level: list[LevelGain]
    #: the run of levels holding its largest verified gain; null where it is verified better nowhere
    verified_range: ConcurrencyRange | None
    tradeoffs: list[Tradeoff]
    reason: str
    #: every run of consecutive measured levels where it is verified better, lowest first
    verified_ranges: list[ConcurrencyRange]
    #: "projected at acceptance L=..." when its trials ran with synthetic acceptance (a projection)
    projected: str | None = None


class PolicyOutput(DeployAnswer):
    """``nova-search policy STUDY --format json``: the deploy answer (``results.deploy.DeployAnswer``,
    its ``schema_version``: the stored ``nova:deploy`` is these first keys), then the verdict's details
    it rests on."""

    #: the ranges as the verdict built them, with their gains (``ranges`` above: what to deploy)
    policy: tuple[PolicyRange, ...]
    drafters: tuple[DrafterRecord, ...]
    tuned_vs_stock: tuple[StockGain, ...]


def _range(pair: tuple[int, int]) -> ConcurrencyRange:
    return ConcurrencyRange(min_concurrency=pair[0], max_concurrency=pair[1])


def _drafter(d: DrafterVerdict) -> DrafterRecord:
    return DrafterRecord(
        method=d.method,
        status=d.status,
        trials=list(d.trials),
        per_level=list(d.per_level),
        verified_range=_range(d.verified_range) if d.verified_range else None,
        tradeoffs=list(d.tradeoffs),
        reason=d.reason,
        verified_ranges=[_range(r) for r in d.verified_ranges],
        projected=d.projected,
    )


def policy_output(answer: DeployAnswer, verdict: Verdict) -> PolicyOutput:
    return PolicyOutput(
        **dict(answer),
        policy=verdict.policy,
        drafters=tuple(_drafter(d) for d in verdict.drafters),
        tuned_vs_stock=tuple(StockGain(concurrency=c, gain_pct=p) for c, p in verdict.tuned_vs_stock),
    )


def policy_dict(answer: DeployAnswer, verdict: Verdict) -> dict[str, Any]:
    """The JSON of ``policy --format json`` (``PolicyOutput``)."""
    return policy_output(answer, verdict).model_dump(mode="json")


CSV_TRIAL_COLUMNS = (
    "study",
    "key",
    "number",
    "stage",
    "state",
    "role",
    "feasible",
    "spec_method",
    "spec_k",
    "projected",
)
CSV_COLUMNS: tuple[str, ...] = (
    *CSV_TRIAL_COLUMNS,
    *(k.name for k in KNOBS if k.kind != "json"),
    "concurrency",
    *METRIC_NAMES,
)


def csv_rows(results: StudyResults) -> list[dict[str, Any]]:
    """One row per trial and measured level (``CSV_COLUMNS``); a trial without levels gets none."""
    rows = []
    for t in results.trials:
        config = t.config.as_dict() if t.config else {}
        spec = t.config.speculative if t.config else None
        base = {
            "study": t.study,
            "key": t.key,
            "number": t.number,
            "stage": t.stage,
            "state": t.state,
            "role": t.role,
            "feasible": t.feasible,
            "spec_method": spec.method if spec else "none",
            "spec_k": spec.num_speculative_tokens if spec else None,
            "projected": projection.label(spec),
            **{k.name: config.get(k.name) for k in KNOBS if k.kind != "json"},
        }
        for lv in t.levels:
            d = lv.as_dict()
            rows.append(base | {"concurrency": lv.concurrency} | {m: d.get(m) for m in METRIC_NAMES})
    return rows


def to_csv(results: StudyResults) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(CSV_COLUMNS), lineterminator="\n")
    writer.writeheader()
    for row in csv_rows(results):
        writer.writerow({k: ("" if v is None else v) for k, v in row.items()})
    return out.getvalue()


def dumps_json(obj: Any) -> str:
    """JSON for CLI output: datetimes as ISO strings in UTC with their offset, non-finite floats as null."""

    def clean(v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, dict):
            return {str(k): clean(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [clean(x) for x in v]
        if isinstance(v, datetime):
            return utc(v).isoformat()
        return v

    return json.dumps(clean(obj), indent=2)
