"""Where a study's GPU time went: inside measurement windows, booting servers, booting servers that
never came up, and the rest (reference outputs, warmups, pauses between windows, teardown).

Each launched trial stores ``schema.TIMING``: ``boot_s`` (launch to healthy; absent when the server
never came up; ``leader_boot_s`` besides where it booted its slot's leader),
``measure_s`` (the sum of its measurement windows) and ``total_s`` (launch to teardown). A trial's
seconds count once per GPU its server held (``EngineConfig.gpus``: tensor parallel size). A trial
pruned before launch holds no GPU and counts nothing. For a study on vLLM's CPU build
(``engine.device: cpu``) the same split is called engine time; ``GpuTime.label`` says which.

``GpuTime`` is the output model of that split as ``status`` prints it (``gpu_time``, each GPU's held
seconds as ``{gpu, seconds}``); ``GpuSeconds``, its four parts, is ``dump``'s ``gpu_time_s``.
"""

from __future__ import annotations

from pydantic import ConfigDict, field_serializer

from nova_search.results.model import OutputModel
from nova_search.results.trials import StudyResults, TrialResult

PARTS = ("windows", "boot", "failed_boot", "other")
_NAMES = {"windows": "windows", "boot": "boots", "failed_boot": "failed boots", "other": "other"}


class GpuSeconds(OutputModel):
    """Where the GPU time went, in seconds (``results.cost``)."""

    #: every key is always written: required in the JSON Schema, defaults or not
    model_config = ConfigDict(json_schema_serialization_defaults_required=True)

    windows: float = 0.0
    boot: float = 0.0
    failed_boot: float = 0.0
    other: float = 0.0


class GpuHeld(OutputModel):
    """How long one GPU was held by a trial's server."""

    gpu: int
    seconds: float


class GpuTime(GpuSeconds):
    """Where the study's GPU time went, in seconds by part, and the trials kept on the Pareto front."""

    #: COMPLETE feasible trials on the Pareto front
    front_trials: int = 0
    #: "GPU time", or "engine time" for a study whose spec runs vLLM's CPU build (engine.device: cpu)
    label: str = "GPU time"
    #: seconds each GPU (by id, as its worker numbers it) was held by a trial's server, and the span
    #: from the first trial's start to the last one's end, less any pause (PAUSE_S or longer with no
    #: trial running): how busy each GPU was while the study ran
    held: tuple[tuple[int, float], ...] = ()
    span_s: float = 0.0
    #: pauses left out of span_s (a study continued in a later session, say)
    pauses: int = 0

    @field_serializer("held")
    def serialize_held(self, held: tuple[tuple[int, float], ...]) -> list[GpuHeld]:
        return [GpuHeld(gpu=g, seconds=s) for g, s in held]

    @property
    def total(self) -> float:
        return self.windows + self.boot + self.failed_boot + self.other

    def seconds(self) -> dict[str, float]:
        """``{"windows": s, "boot": s, "failed_boot": s, "other": s}`` (a summary.json's gpu_time_s)."""
        return {p: getattr(self, p) for p in PARTS}

    def share(self, part: str) -> float:
        return getattr(self, part) / self.total if self.total > 0 else 0.0

    @property
    def hours_per_front_trial(self) -> float | None:
        """GPU-hours the study spent for each trial it keeps on the front."""
        return self.total / 3600.0 / self.front_trials if self.front_trials else None

    def text(self) -> str:
        """One line: the total, each part's share, and GPU-hours per trial on the front."""
        if self.total <= 0:
            return f"{self.label}: nothing launched yet"
        parts = ", ".join(f"{_NAMES[p]} {self.share(p):.0%}" for p in PARTS)
        per = self.hours_per_front_trial
        front = (
            f"; {per:.3g} {self.unit}-h per trial on the front ({self.front_trials})"
            if per is not None
            else "; no trial on the front yet"
        )
        return f"{self.label}: {self.total:.0f} s ({self.total / 3600:.3g} {self.unit}-h): {parts}{front}"

    def held_text(self) -> str | None:
        """One line: each GPU's held seconds and their share of the study's span (None: no GPU ids)."""
        if not self.held or self.span_s <= 0:
            return None
        each = ", ".join(f"GPU {g} {s / self.span_s:.0%} ({s:.0f} s)" for g, s in self.held)
        paused = (
            f" ({self.pauses} pause{'s' * (self.pauses > 1)} of {PAUSE_S / 60:.0f} min or more left out)"
            if self.pauses
            else ""
        )
        return f"GPUs held by a server: {each} of the study's {self.span_s:.0f} s{paused}"

    @property
    def unit(self) -> str:
        return "GPU" if self.label == "GPU time" else "engine"


def trial_gpu_time(t: TrialResult) -> dict[str, float]:
    """One trial's GPU-seconds by part (all zero when it never launched)."""
    total = t.timing.get("total_s", 0.0)
    out = dict.fromkeys(PARTS, 0.0)
    if total <= 0:
        return out
    gpus = t.gpus
    if "boot_s" not in t.timing:
        out["failed_boot"] = total * gpus
        return out
    # a trial that booted its slot's leader (residency.adopt_tuned / adopt_leader) booted twice
    boot = min(t.timing["boot_s"] + t.timing.get("leader_boot_s", 0.0), total)
    windows = min(t.timing.get("measure_s", 0.0), total - boot)
    out.update(windows=windows * gpus, boot=boot * gpus, other=(total - boot - windows) * gpus)
    return out


def gpu_time(results: StudyResults) -> GpuTime:
    """The study's GPU time, every stage together, and the trials it keeps on the front."""
    sums = dict.fromkeys(PARTS, 0.0)
    for t in results.trials:
        for part, s in trial_gpu_time(t).items():
            sums[part] += s
    engine = (results.spec or {}).get("engine") if isinstance(results.spec, dict) else None
    on_gpu = not (isinstance(engine, dict) and engine.get("device") == "cpu")  # the spec's default: cuda
    held, span_s, pauses = gpus_held(results)
    return GpuTime(
        **sums,
        front_trials=len(results.pareto()),
        label="GPU time" if on_gpu else "engine time",
        held=held,
        span_s=span_s,
        pauses=pauses,
    )


#: a gap between trials this long or longer, with none running, is a pause of the study (its workers
#: stopped, to go on in a later session), not time its GPUs stood idle: status's "workers seen" window
PAUSE_S = 900.0


def gpus_held(results: StudyResults) -> tuple[tuple[tuple[int, float], ...], float, int]:
    """Seconds each GPU was held (a trial's server holds its GPUs for the trial's whole run, boot
    included), by GPU id; the span of the study's trials less its pauses; and the number of pauses.
    GPUs without ids are not counted."""
    held: dict[int, float] = {}
    runs = []
    for t in results.trials:
        if t.datetime_start is None or t.datetime_complete is None:
            continue
        runs.append((t.datetime_start, t.datetime_complete))
        run = t.timing.get("total_s", 0.0)
        for g in t.worker.gpus if t.worker is not None else ():
            held[g] = held.get(g, 0.0) + run
    span, pauses = 0.0, 0
    if runs:
        runs.sort()
        start, end = runs[0]
        for s, e in runs[1:]:
            if (s - end).total_seconds() >= PAUSE_S:
                span, pauses = span + (end - start).total_seconds(), pauses + 1
                start = s
            end = max(end, e)
        span += (end - start).total_seconds()
    return tuple(sorted(held.items())), span, pauses
