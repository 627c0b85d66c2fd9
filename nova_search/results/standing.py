"""Where a running study stands (``StudyStatus``): trials by state, the workers seen lately, the best so
far per objective, an ETA, where the GPU time went, and the capacity at the SLO
(``results.capacity_table``). A pure function of ``results.StudyResults`` (and the current time),
``study_status``; ``report.status`` writes it as text.

``StudyStatus`` is the model of ``nova-search status STUDY --format json`` too: ``StatusOutput`` is it,
then the deploy answer (``results.deploy``), one model per output (``results.model``).

Workers are read from the trials themselves (no registry): each trial stores its ``schema.WORKER`` (host,
GPU group and the worker's pid), and Optuna stores when it started and finished. A worker is its host
and pid (host and GPUs for trials recorded before the pid was kept). A worker slot is *active* when it
runs a trial now; it is *seen recently* when it is active or finished a trial within ``recent_s``. An
idle worker on this host is *exited* when its pid is gone, and *waiting* when the budget is used up
while trials still run (it stays to run a dead worker's retry); on another host, whether it is still
there cannot be told from here.

ETA = (remaining budget x mean duration of launched trials + what is left of the running trials,
each at most the mean) / active slots. A configuration refused before launch takes no time and no
budget (``db.budget``): it is left out of both. Optuna records naive local times, so ``now`` is local
too.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from datetime import datetime
from typing import Literal

from nova_search.analysis import dominance
from nova_search.results.capacity_table import CapacityRow, capacity_rows
from nova_search.results.cost import GpuTime, gpu_time
from nova_search.results.deploy import DeployAnswer
from nova_search.results.model import OutputModel, Timestamp
from nova_search.results.select import best_trials, tuned_baseline
from nova_search.results.trials import StudyResults, TrialResult
from nova_search.spec import level_name

STATUS_SCHEMA_VERSION = 1
STATES = ("COMPLETE", "RUNNING", "WAITING", "PRUNED", "FAIL")
#: a slot that finished a trial this long ago (seconds) still counts as seen recently
RECENT_S = 900.0


class WorkerSeen(OutputModel):
    """A worker seen lately: the trial it runs, when it was last seen, what it does when idle."""

    host: str
    gpus: tuple[int, ...]
    #: the trial it runs now (a staged study: its key, speculative#3); null when idle
    running_trial: int | str | None
    #: in UTC (the JSON's timestamps carry their offset)
    last_seen: Timestamp
    trials_finished: int
    #: the worker's process id (null: a trial recorded before it was kept)
    pid: int | None
    #: when idle: exited, waiting or idle (``idle_state`` in ``study_status``); running when not
    idle_state: str


#: whether a worker's process is alive: True/False on this host, None where it cannot be told
Alive = Callable[[str, int | None], bool | None]


def local_alive(host: str, pid: int | None) -> bool | None:
    """Whether ``pid`` runs, for a worker on this host; None for another host or no pid."""
    if pid is None or host != socket.gethostname():
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


#: metrics a server delivers per second: status also gives them per GPU the server held
PER_GPU_METRICS = ("output_throughput", "total_token_throughput", "request_throughput", "goodput", "capacity")


class BestSoFar(OutputModel):
    """The best value so far of one objective."""

    objective: str
    direction: Literal["maximize", "minimize"]
    value: float
    trial_number: int | str
    #: GPUs the trial's server held (tensor_parallel_size)
    gpus: int
    #: a throughput objective per GPU the server held (PER_GPU_METRICS); null for other metrics
    per_gpu: float | None
    #: "projected at acceptance L=2.6" when the trial ran with synthetic acceptance (a projection)
    projected: str | None = None


class StudyStatus(OutputModel):
    """Where a study stands (``study_status``)."""

    schema_version: Literal[1] = STATUS_SCHEMA_VERSION
    study_name: str
    #: the storage URL, password masked
    storage: str
    #: trials by state: COMPLETE, RUNNING, WAITING, PRUNED, FAIL
    counts: dict[str, int]
    budget: int | None
    budget_used: int
    workers: tuple[WorkerSeen, ...]
    active_slots: int
    best: tuple[BestSoFar, ...]
    mean_trial_s: float | None
    eta_s: float | None
    eta_note: str
    #: the tuned baseline's key (``results.select.tuned_baseline``)
    tuned: str | None
    notes: tuple[str, ...]
    #: where the study's GPU time went (``results.cost``)
    gpu_time: GpuTime
    #: configurations refused before launch: counted apart from the budget (``db.budget``)
    refused: int
    #: trials of the budget still to run; null without a budget
    remaining: int | None
    #: capacity at the SLO (``spec.capacity``): stock, tuned, best, each drafter's best; empty without
    capacity: tuple[CapacityRow, ...] = ()


class StatusOutput(StudyStatus):
    """``nova-search status STUDY --format json``: where a study stands, then what to deploy so far."""

    #: the deploy answer (``policy``'s, with its own schema_version)
    deploy: DeployAnswer


def status_output(status: StudyStatus, answer: DeployAnswer) -> StatusOutput:
    """The status, then the deploy answer: what ``status --format json`` prints."""
    return StatusOutput(**dict(status), deploy=answer)


WorkerKey = tuple[str, int | None, tuple[int, ...]]


def _worker_key(t: TrialResult) -> WorkerKey:
    """A worker: its host and pid; host and GPUs for a trial recorded before the pid was kept."""
    if t.worker is None:
        return ("unknown host", None, ())
    if t.worker.pid is not None:
        return (t.worker.host, t.worker.pid, ())
    return (t.worker.host, None, t.worker.gpus)


def _launched(t: TrialResult) -> bool:
    """Whether the trial's server was launched (a configuration refused before launch was not)."""
    return t.reason != "incompatible"


def study_status(
    results: StudyResults,
    *,
    now: datetime | None = None,
    recent_s: float = RECENT_S,
    alive: Alive = local_alive,
) -> StudyStatus:
    """Where ``results`` stands at ``now`` (local time; see the module docstring): workers seen within
    ``recent_s``, each idle one's process asked of ``alive``."""
    now = now or datetime.now()
    counts = {s: 0 for s in STATES}
    for t in results.trials:
        counts[t.state] = counts.get(t.state, 0) + 1

    seen: dict[WorkerKey, dict] = {}
    for t in results.trials:
        if t.worker is None or t.datetime_start is None:
            continue
        key = _worker_key(t)
        running = t.state == "RUNNING"
        last = now if running else (t.datetime_complete or t.datetime_start)
        if not running and (now - last).total_seconds() > recent_s:
            continue
        entry = seen.setdefault(key, {"running": None, "last": last, "finished": 0, "gpus": set()})
        entry["last"] = max(entry["last"], last)
        entry["gpus"] |= set(t.worker.gpus)
        if running:
            entry["running"] = t.key
        else:
            entry["finished"] += 1
    running_trials = [t for t in results.trials if t.state == "RUNNING"]
    spent = results.budget is not None and results.budget_used >= results.budget

    def idle_state(host: str, pid: int | None) -> str:
        up = alive(host, pid)
        if up is False:
            return "exited"
        return "waiting" if up and spent and running_trials else "idle"

    workers = tuple(
        WorkerSeen(
            host=host,
            gpus=tuple(sorted(e["gpus"])) or gpus,
            running_trial=e["running"],
            last_seen=e["last"],
            trials_finished=e["finished"],
            pid=pid,
            idle_state=idle_state(host, pid) if e["running"] is None else "running",
        )
        for (host, pid, gpus), e in sorted(seen.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0, kv[0][2]))
    )
    # a RUNNING trial without nova:worker (just asked) still occupies a slot; with the pid, each
    # running trial is a slot of its own (one worker may run several side by side)
    active = len(
        {(_worker_key(t), t.worker.gpus) if t.worker else ("?", None, (t.number,)) for t in running_trials}
    )

    best: list[BestSoFar] = []
    feasible = results.feasible()
    for o in results.objectives:
        top = best_trials(results, objective=o)
        if top and top[0].values is not None and o.index is not None:
            t, value = top[0], top[0].values[o.index]
            per_gpu = value / t.gpus if o.metric in PER_GPU_METRICS else None
            best.append(
                BestSoFar(
                    objective=o.name,
                    direction=o.direction,
                    value=value,
                    trial_number=t.key,
                    gpus=t.gpus,
                    per_gpu=per_gpu,
                    projected=t.projected,
                )
            )
    tuned = tuned_baseline(results)

    durations = [
        d
        for t in results.trials
        if t.state in ("COMPLETE", "PRUNED", "FAIL") and _launched(t) and (d := t.duration_s) is not None
    ]
    mean = sum(durations) / len(durations) if durations else None
    budget = results.budget
    notes: list[str] = []
    if budget is None:
        eta, eta_note = None, "no budget stored with the study"
    elif max(budget - results.budget_used, 0) == 0 and not running_trials:
        eta, eta_note = 0.0, "done: the budget is used up"
    elif mean is None:
        eta, eta_note = None, "no launched trial has finished yet to time"
    elif active == 0:
        eta, eta_note = None, "no active worker: start one (nova-search worker)"
    else:
        remaining = max(budget - results.budget_used, 0)
        left_running = sum(
            max(mean - (now - t.datetime_start).total_seconds(), 0.0)
            for t in running_trials
            if t.datetime_start is not None
        )
        eta = (remaining * mean + left_running) / active
        eta_note = (
            f"mean launched trial {mean:.0f}s x {remaining} remaining (+ {len(running_trials)} running) "
            f"/ {active} active slot{'s' if active != 1 else ''}"
        )
    if not feasible and counts["COMPLETE"]:
        notes.append("no COMPLETE trial meets every constraint yet")
    stopped = [t for t in results.trials if t.state == "PRUNED" and t.reason in dominance.REASONS]
    for t in stopped[:5]:
        notes.append(f"trial {t.key} {t.reason}: {t.message}")
    if len(stopped) > 5:
        notes.append(f"... and {len(stopped) - 5} more trials stopped early (see the report)")
    if projected := [t for t in results.complete() if t.projected]:
        notes.append(
            "trials "
            + ", ".join(f"{t.key} ({t.projected})" for t in projected)
            + " ran with synthetic acceptance: their figures are projections, not measurements of the drafter"
        )
    for t in results.complete():
        if t.client_bound_levels:
            notes.append(
                f"trial {t.key}: client-bound at "
                f"{', '.join(level_name(c, results.replays_trace) for c in t.client_bound_levels)} "
                "(the load generator may have set those figures; see the trial's warnings)"
            )
    return StudyStatus(
        study_name=results.study_name,
        storage=results.storage,
        counts=counts,
        budget=budget,
        budget_used=results.budget_used,
        workers=workers,
        active_slots=active,
        best=tuple(best),
        mean_trial_s=mean,
        eta_s=eta,
        eta_note=eta_note,
        tuned=tuned.key if tuned else None,
        notes=tuple(notes),
        gpu_time=gpu_time(results),
        refused=sum(1 for t in results.trials if t.state == "PRUNED" and not _launched(t)),
        remaining=None if budget is None else max(budget - results.budget_used, 0),
        capacity=capacity_rows(results),
    )
