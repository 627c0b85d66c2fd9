"""What a worker shows while it runs, and the final tables.

Two reporters (``trial.context.Reporter``): ``RichReporter``, for a person (on a terminal, rich's progress
display: trial i of N, the phase, level k of n with requests done out of total, the running best and an
ETA; every trial's start, measured levels and end are also printed as lines, which is all a log file
gets), and ``JsonReporter``, the ``--log-format json`` event stream (one JSON object per line,
``docs/events.md``). The final tables (``outcome_table``, ``pareto_table``) print each configuration
as a block of ``key: value`` lines under its row, so they stay whole in 80 columns and in a log."""

from __future__ import annotations

import json
import math
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import IO, Any

from rich.console import Console, Group, RenderableType
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TaskID,
    TimeElapsedColumn,
)
from rich.table import Column, Table
from rich.text import Text

from nova_search.measure.metrics import LevelResult
from nova_search.redact import one_line
from nova_search.results.schemas.events import EVENTS_SCHEMA_VERSION
from nova_search.results.select import best_trials
from nova_search.results.trials import StudyResults
from nova_search.spec import level_name
from nova_search.trial.context import NullReporter, TrialEnd


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "unknown"
    s = int(round(seconds))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}h{m:02d}m" if h else (f"{m}m{sec:02d}s" if m else f"{sec}s")


class _Description(ProgressColumn):
    """The text of a row, as plain text (never markup), folded onto further lines rather than cut at
    the terminal's width (80 or 120 columns cut the running best and the ETA); the study's row is
    written at every refresh (``RichReporter.study_text``), so its ETA counts down between events."""

    def __init__(self, reporter: RichReporter) -> None:
        super().__init__(table_column=Column(no_wrap=False, overflow="fold", ratio=1))
        self.reporter = reporter

    def render(self, task: Task) -> Text:
        if task.id == self.reporter._study:
            return Text(self.reporter.study_text())
        return Text(task.description)


class RichReporter(NullReporter):
    """Progress for a person. ``objectives`` are (name, maximize) pairs, for the running best."""

    def __init__(
        self,
        console: Console,
        total: int,
        objectives: Sequence[tuple[str, bool]] = (),
        level_name: Callable[[int], str] = lambda c: f"concurrency {c}",
    ) -> None:
        self.console = console
        #: how a level reads: ``concurrency 4``, or a trace replay's ``speed 2x`` (``StudySpec.level_name``)
        self.level_name = level_name
        self.total = total
        self.objectives = tuple(objectives)
        # the text last: it takes the width the bar and counts leave, and folds onto another line when
        # it needs more (never cut)
        self._lock = threading.RLock()
        self._study = TaskID(-1)  # set below; _Description reads it
        self._waiting = False
        self.progress = Progress(
            SpinnerColumn(),
            BarColumn(bar_width=20),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            _Description(self),
            console=console,
            transient=True,
            expand=True,  # the text takes the width left; the other columns keep theirs
        )
        self._study = self.progress.add_task("trials", total=total, start=True)
        self._tasks: dict[int, TaskID] = {}
        self._started: dict[int, float] = {}
        self._phase: dict[int, str] = {}
        self._level: dict[int, str] = {}
        self._used = 0
        self._refused = 0
        self._finished = 0  # trials told by this worker that count toward the budget
        self._launched_s: list[float] = []  # durations of launched trials (a refused one takes no time)
        self._best: dict[int, tuple[float, int]] = {}  # objective index -> (value, trial number)

    def __enter__(self) -> RichReporter:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    # -- the study line: trial i of N, the running best, the ETA -------------------------------------

    def budget(self, used: int, total: int, refused: int) -> None:
        with self._lock:
            self._used, self.total, self._refused = used, total, refused
            self._waiting = False
            self._update_study()

    def eta_s(self) -> float | None:
        """From launched trials only: their mean duration x the trials not yet asked, plus what is left
        of the running ones, over the trials running here side by side."""
        if not self._launched_s:
            return None
        mean = sum(self._launched_s) / len(self._launched_s)
        now = time.monotonic()
        running = [max(mean - (now - t0), 0.0) for t0 in self._started.values()]
        remaining = max(self.total - self._used, 0)
        return (remaining * mean + sum(running)) / max(len(running), 1)

    def best_text(self) -> str:
        parts = []
        for i, (name, maximize) in enumerate(self.objectives):
            if i in self._best:
                value, number = self._best[i]
                parts.append(f"{name} {'↑' if maximize else '↓'} {value:.4g} (#{number})")
        return "best: " + ", ".join(parts) if parts else ""

    def study_text(self) -> str:
        """The study's row: trial i of N, the ETA as of now, what was refused, the running best."""
        with self._lock:
            if self._waiting:
                return "waiting"
            eta = self.eta_s()
            parts = [f"trial {min(self._used, self.total)} of {self.total}"]
            parts.append(f"ETA {_duration(eta)}" if eta is not None else "ETA after the first measured trial")
            if self._refused:
                parts.append(f"{self._refused} refused (not counted)")
            parts.append(self.best_text())
            return one_line(" · ".join(x for x in parts if x))

    def _update_study(self) -> None:
        self.progress.update(
            self._study, total=self.total, completed=min(self._used, self.total), description="trials"
        )

    # -- one trial --------------------------------------------------------------------------------

    def trial_started(self, number: int, label: str, params: dict[str, Any] | None = None) -> None:
        with self._lock:
            self._started[number] = time.monotonic()
            self._phase[number] = "sampled"
            self._tasks[number] = self.progress.add_task(f"  #{number} sampled", total=None, start=True)
            self.console.log(f"trial {number}: {escape(one_line(label))}")
            self._update_study()

    def phase(self, number: int, text: str) -> None:
        with self._lock:
            self._phase[number] = text
            self._show(number)

    def level_started(
        self, number: int, index: int, count: int, concurrency: int, requests: int | None
    ) -> None:
        with self._lock:
            self._level[number] = f"level {index + 1} of {count} ({self.level_name(concurrency)})"
            task = self._tasks.get(number)
            if task is not None:
                self.progress.reset(task, total=requests, completed=0)
            self._show(number)

    def requests_done(self, number: int, done: int) -> None:
        with self._lock:
            task = self._tasks.get(number)
            if task is not None:
                self.progress.update(task, completed=done)

    def _show(self, number: int) -> None:
        task = self._tasks.get(number)
        if task is None:
            return
        phase = self._phase.get(number, "")
        level = self._level.get(number)
        if level and phase.startswith(("concurrency ", "speed ")):  # the sweep's: "speed 2x[ · window r/R]"
            rest = phase.split(" · ", 1)[1] if " · " in phase else ""
            text = level + (f" · {rest}" if rest else "")
        else:
            text = phase
        self.progress.update(task, description=f"  #{number} {one_line(text)}")  # plain text (_Description)
        self._update_study()

    def level_measured(self, number: int, level: LevelResult) -> None:
        d = level.as_dict()
        parts = [f"{d.get('completed')} ok"]
        for key, name, unit in (
            ("output_throughput", "out", " tok/s"),
            ("ttft_p99_ms", "TTFT p99", " ms"),
            ("tpot_p50_ms", "TPOT p50", " ms"),
        ):
            if isinstance(d.get(key), int | float):
                parts.append(f"{name} {d[key]:.4g}{unit}")
        if d.get("errors"):
            parts.append(f"{d['errors']} errors")
        with self._lock:
            self.console.log(f"trial {number} · {self.level_name(level.concurrency)}: {', '.join(parts)}")

    def trial_finished(self, end: TrialEnd) -> None:
        with self._lock:
            started = self._started.pop(end.number, None)
            took = time.monotonic() - started if started is not None else 0.0
            if end.launched and started is not None:
                self._launched_s.append(took)
            task = self._tasks.pop(end.number, None)
            if task is not None:
                self.progress.remove_task(task)
            self._phase.pop(end.number, None)
            self._level.pop(end.number, None)
            if end.feasible and end.values is not None:
                for i, (_, maximize) in enumerate(self.objectives[: len(end.values)]):
                    v = end.values[i]
                    old = self._best.get(i)
                    if old is None or (v > old[0] if maximize else v < old[0]):
                        self._best[i] = (v, end.number)
            color = {"COMPLETE": "green", "PRUNED": "yellow", "FAIL": "red"}.get(end.state, "white")
            note = "" if end.launched else " (refused before launch: not counted toward the budget)"
            # detail may quote an engine's log ("[rank0]: ..."): text, not markup
            detail = escape(one_line(end.detail))
            self.console.log(f"trial {end.number} [{color}]{end.state}[/] in {took:.0f}s: {detail}{note}")
            best = self.best_text()
            if best and end.feasible:
                self.console.log(best)
            self._update_study()

    def waiting(self, running: int) -> None:
        with self._lock:
            self.console.log(
                f"budget used up: waiting for {running} running trial(s) elsewhere "
                "(one may be a dead worker's, to be retried)"
            )
            self._waiting = True


def _plain(v: Any) -> Any:
    """JSON-safe: a non-finite float is null (JSON has no NaN)."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    return v


class JsonReporter(NullReporter):
    """The ``--log-format json`` event stream: one JSON object per line on ``out``, each with
    ``schema_version``, ``event``, ``time`` (UTC, ISO 8601) and ``worker`` (host, pid)
    (``docs/events.md``)."""

    def __init__(self, out: IO[str], study_name: str) -> None:
        self.out = out
        self.study_name = study_name
        self.worker = {"host": socket.gethostname(), "pid": os.getpid()}
        self._lock = threading.Lock()

    def emit(self, event: str, **fields: Any) -> None:
        record = {
            "schema_version": EVENTS_SCHEMA_VERSION,
            "event": event,
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "study": self.study_name,
            "worker": self.worker,
            **fields,
        }
        line = json.dumps(_plain(record), allow_nan=False, default=str)
        with self._lock:
            self.out.write(line + "\n")
            self.out.flush()

    def budget(self, used: int, total: int, refused: int) -> None:
        self._budget = (used, total, refused)

    def trial_started(self, number: int, label: str, params: dict[str, Any] | None = None) -> None:
        used, total, refused = getattr(self, "_budget", (None, None, None))
        self.emit(
            "trial_started",
            number=number,
            params=params or {},
            budget={"used": used, "total": total, "refused": refused},
        )

    def level_measured(self, number: int, level: LevelResult) -> None:
        self.emit("level_measured", number=number, level=level.concurrency, values=level.as_dict())

    def trial_finished(self, end: TrialEnd) -> None:
        self.emit(
            "trial_ended",
            number=end.number,
            state=end.state,
            values=list(end.values) if end.values is not None else None,
            feasible=end.feasible,
            launched=end.launched,
            reason=end.reason,
            detail=end.detail,
        )

    def waiting(self, running: int) -> None:
        self.emit("worker_waiting", running=running)

    def exited(self, ran: int) -> None:
        self.emit("worker_exited", trials=ran)


def _config_block(t: Any) -> list[str]:
    """A trial's configuration as ``key: value`` lines (the knobs that are set)."""
    if t.config is None:
        return ["(no configuration recorded)"]
    d = t.config.as_dict()
    lines = [one_line(f"{k}: {v}") for k, v in d.items() if v is not None and k != "speculative"]
    spec = d.get("speculative")
    if spec:
        lines.append(
            one_line("speculative: " + ", ".join(f"{k}={v}" for k, v in spec.items() if v is not None))
        )
    if projected := getattr(t, "projected", None):  # synthetic acceptance: its figures are projections
        lines.insert(0, f"PROJECTED ({projected}): a projection, not a measurement of the drafter")
    return lines or ["vLLM defaults"]


def pareto_table(results: StudyResults) -> RenderableType | None:
    """The study's best trials (``results.select.best_trials``: the feasible Pareto front, best first):
    a table of their figures, then each one's configuration as its own block (whole at any width)."""
    best = best_trials(results)
    if not best:
        return None
    table = Table(title=f"Pareto-optimal trials of {results.study_name}")
    table.add_column("trial", justify="right")
    table.add_column("role")
    for o in results.objectives:  # a long name folds onto a second line, never cut
        table.add_column(f"{o.name} {'↑' if o.maximize else '↓'}", justify="right", overflow="fold")
    table.add_column("GPUs", justify="right")
    table.add_column("peak tok/s per GPU", justify="right")
    blocks: list[RenderableType] = []
    for t in best:
        table.add_row(
            t.key,
            t.role,
            *(f"{v:.4g}" for v in t.values or ()),
            str(t.gpus),
            _fmt(t.peak_throughput_per_gpu),
        )
        lines = [f"  {line}" for line in _config_block(t)]
        if t.client_bound_levels:
            at = ", ".join(level_name(c, results.replays_trace) for c in t.client_bound_levels)
            lines.append(f"  client-bound at {at}")
        blocks.append(Text(f"trial {t.key} ({t.role}):\n" + "\n".join(lines)))
    return Group(table, Text("configurations of the Pareto-optimal trials:", style="bold"), *blocks)


def outcome_table(results: StudyResults) -> Table:
    """Every trial: its state, then its values or its reason, whole (folded, never cut)."""
    table = Table(title=f"trials of {results.study_name}")
    table.add_column("trial", no_wrap=True)
    table.add_column("state", no_wrap=True)
    table.add_column("values / reason", overflow="fold")
    for t in results.trials:
        if t.state == "COMPLETE":
            detail = ", ".join(f"{v:.4g}" for v in t.values or ())
        else:
            detail = one_line(f"{t.reason or ''}: {t.message or ''}"[:500])
            if t.reason == "incompatible":
                detail += " (refused before launch: not counted toward the budget)"
        table.add_row(t.key, t.state, detail)
    return table


def _fmt(v: object) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


PROFILE_COLUMNS = (
    ("concurrency", "conc"),
    ("completed", "ok"),
    ("errors", "err"),
    ("output_throughput", "out tok/s"),
    ("request_throughput", "req/s"),
    ("ttft_p50_ms", "TTFT p50"),
    ("ttft_p99_ms", "TTFT p99"),
    ("tpot_p50_ms", "TPOT p50"),
    ("tpot_p99_ms", "TPOT p99"),
    ("itl_p50_ms", "ITL p50"),
    ("e2e_p50_ms", "E2E p50"),
    ("e2e_p99_ms", "E2E p99"),
    ("kv_cache_usage_peak", "KV peak"),
    ("num_waiting_max", "waiting max"),
    ("spec_acceptance_rate", "accept"),
)


def profile_table(levels: list, title: str) -> Table:
    """One row per level: throughput and latencies (ms)."""
    table = Table(title=title)
    for _, header in PROFILE_COLUMNS:
        table.add_column(header, justify="right")
    for lv in levels:
        d = lv.as_dict()
        table.add_row(*(_fmt(d.get(key)) for key, _ in PROFILE_COLUMNS))
    return table
