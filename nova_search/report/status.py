"""Where a running study stands: trials by state, the workers seen lately, the best so far per
objective, and an ETA. A pure function of ``results.StudyResults`` (and the current time).

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
from dataclasses import dataclass, field
from datetime import datetime

from nova_search.analysis import dominance
from nova_search.results.cost import GpuTime, gpu_time
from nova_search.results.select import best_trials, tuned_baseline
from nova_search.results.trials import StudyResults, TrialResult

STATES = ("COMPLETE", "RUNNING", "WAITING", "PRUNED", "FAIL")
#: a slot that finished a trial this long ago (seconds) still counts as seen recently
RECENT_S = 900.0


@dataclass(frozen=True)
class WorkerSeen:
    host: str
    gpus: tuple[int, ...]
    #: the trial it runs now, None when idle
    running_trial: int | str | None  # a staged study: the key (speculative#3)
    last_seen: datetime
    trials_finished: int = 0
    #: the worker's process id (None: a trial recorded before it was kept)
    pid: int | None = None
    #: when idle: "exited", "waiting" or "idle" (``_idle_state``)
    idle_state: str = "idle"

    @property
    def label(self) -> str:
        who = f"{self.host} pid {self.pid}" if self.pid is not None else self.host
        return f"{who} [gpus {','.join(map(str, self.gpus))}]" if self.gpus else who

    @property
    def doing(self) -> str:
        if self.running_trial is not None:
            return f"running trial {self.running_trial}"
        return {
            "exited": "exited",
            "waiting": "waiting (budget used up; stays while trials run, for a dead worker's retry)",
        }.get(self.idle_state, "idle")


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
PER_GPU_METRICS = ("output_throughput", "total_token_throughput", "request_throughput", "goodput")


@dataclass(frozen=True)
class BestSoFar:
    objective: str
    direction: str
    value: float
    trial_number: int | str
    #: GPUs the trial's server held (tensor_parallel_size)
    gpus: int = 1
    #: ``value`` per GPU, for a throughput (PER_GPU_METRICS); None for any other metric
    per_gpu: float | None = None
    #: "projected at acceptance L=2.6" when the trial ran with synthetic acceptance (a projection)
    projected: str | None = None


@dataclass(frozen=True)
class StudyStatus:
    study_name: str
    storage: str
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
    tuned: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: where the study's GPU time went (``results.cost``)
    gpu_time: GpuTime = field(default_factory=GpuTime)
    #: configurations refused before launch: counted apart from the budget (``db.budget``)
    refused: int = 0

    @property
    def remaining(self) -> int | None:
        return None if self.budget is None else max(self.budget - self.budget_used, 0)


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
            host,
            tuple(sorted(e["gpus"])) or gpus,
            e["running"],
            e["last"],
            e["finished"],
            pid,
            idle_state(host, pid) if e["running"] is None else "running",
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
            best.append(BestSoFar(o.name, o.direction, value, t.key, t.gpus, per_gpu, t.projected))
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
                f"trial {t.key}: client-bound at concurrency {', '.join(map(str, t.client_bound_levels))} "
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
    )


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "unknown"
    s = int(round(seconds))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}h{m:02d}m" if h else (f"{m}m{sec:02d}s" if m else f"{sec}s")


def status_lines(st: StudyStatus, now: datetime | None = None) -> list[str]:
    """The status as plain text lines (what ``nova-search status`` prints)."""
    now = now or datetime.now()
    budget = "no budget" if st.budget is None else f"budget {st.budget}, used {st.budget_used}"
    if st.refused:
        budget += f" ({st.refused} configuration(s) refused before launch, not counted)"
    lines = [f"study {st.study_name} in {st.storage}: {budget}"]
    lines.append("trials: " + ", ".join(f"{k} {v}" for k, v in st.counts.items()))
    if st.workers:
        lines.append(f"workers seen in the last {RECENT_S / 60:.0f} min ({st.active_slots} active):")
        for w in st.workers:
            ago = format_duration((now - w.last_seen).total_seconds())
            lines.append(
                f"  {w.label}: {w.doing}, {w.trials_finished} finished recently, last seen {ago} ago"
            )
    else:
        lines.append(f"workers seen in the last {RECENT_S / 60:.0f} min: none")
    if st.best:
        lines.append("best so far (feasible):")
        for b in st.best:
            arrow = "max" if b.direction == "maximize" else "min"
            gpus = f", {b.gpus} GPUs" if b.gpus > 1 else ""
            # per GPU only where it differs from per server: a server of several GPUs
            per_gpu = f"; {b.per_gpu:.4g} per GPU" if b.per_gpu is not None and b.gpus > 1 else ""
            proj = f", {b.projected}" if b.projected else ""
            lines.append(
                f"  {b.objective} ({arrow}): {b.value:.4g} (trial {b.trial_number}{gpus}{per_gpu}{proj})"
            )
    else:
        lines.append("best so far: no feasible COMPLETE trial yet")
    lines.append(f"tuned baseline: trial {st.tuned}" if st.tuned else "tuned baseline: none yet")
    lines.append(f"ETA: {format_duration(st.eta_s)} ({st.eta_note})")
    lines.append(st.gpu_time.text())
    held = st.gpu_time.held_text()
    if held is not None:
        lines.append(held)
    lines.extend(f"note: {n}" for n in st.notes)
    return lines
