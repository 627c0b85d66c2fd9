"""``nova-search status`` as text: where a running study stands (``results.standing.StudyStatus``, its
record and its JSON) written as lines: trials by state, the workers seen lately and what each does, the
best so far per objective, the tuned baseline, the capacity at the SLO, the ETA and where the GPU time went.
"""

from __future__ import annotations

from datetime import datetime

from nova_search.results.capacity_table import CapacityRow
from nova_search.results.model import utc
from nova_search.results.standing import RECENT_S, StudyStatus, WorkerSeen


def capacity_line(c: CapacityRow) -> str:
    """What the search found, then cost and energy at capacity (each said absent, with why)."""
    parts = [c.text]
    if c.status == "found":
        cost = f"${c.cost_per_mtok:.4g}/Mtok" if c.cost_per_mtok is not None else f"cost: {c.cost_note}"
        energy = (
            f"{c.joules_per_token:.4g} J/token"
            if c.joules_per_token is not None
            else f"energy: {c.energy_note}"
        )
        parts += [cost, energy]
    if not c.done:
        parts.append(f"still searching ({c.probes} probe(s) so far)")
    return "; ".join(parts)


def worker_label(w: WorkerSeen) -> str:
    """``node1 pid 101 [gpus 0,1]``: the host, the pid where known, the GPUs."""
    who = f"{w.host} pid {w.pid}" if w.pid is not None else w.host
    return f"{who} [gpus {','.join(map(str, w.gpus))}]" if w.gpus else who


def worker_doing(w: WorkerSeen) -> str:
    """What the worker does: the trial it runs, else whether it exited, waits or idles."""
    if w.running_trial is not None:
        return f"running trial {w.running_trial}"
    return {
        "exited": "exited",
        "waiting": "waiting (budget used up; stays while trials run, for a dead worker's retry)",
    }.get(w.idle_state, "idle")


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
            ago = format_duration((utc(now) - utc(w.last_seen)).total_seconds())  # last_seen: UTC
            lines.append(
                f"  {worker_label(w)}: {worker_doing(w)}, {w.trials_finished} finished recently, "
                f"last seen {ago} ago"
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
    if st.capacity:
        lines.append("capacity at the SLO:")
        lines.extend(f"  {c.which} (trial {c.trial}): {capacity_line(c)}" for c in st.capacity)
    lines.append(f"ETA: {format_duration(st.eta_s)} ({st.eta_note})")
    lines.append(st.gpu_time.text())
    held = st.gpu_time.held_text()
    if held is not None:
        lines.append(held)
    lines.extend(f"note: {n}" for n in st.notes)
    return lines
