"""Rich progress for long runs: the trial, the level, the state and the elapsed time; and the final
table of Pareto-optimal trials."""

from __future__ import annotations

import time

from rich.console import Console
from rich.markup import escape
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from nova_search.results.select import best_trials
from nova_search.results.trials import StudyResults


class RichReporter:
    def __init__(self, console: Console, total: int) -> None:
        self.console = console
        self.total = total
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self._task = self.progress.add_task("waiting", total=None)
        self._started: dict[int, float] = {}

    def __enter__(self) -> RichReporter:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def trial_started(self, number: int, label: str) -> None:
        self._started[number] = time.monotonic()
        self.console.log(f"trial {number}: {escape(label)}")
        self.progress.reset(self._task, description=f"trial {number}/{self.total} · sampling")

    def phase(self, number: int, text: str) -> None:
        self.progress.update(self._task, description=f"trial {number}/{self.total} · {text}")

    def trial_finished(self, number: int, state: str, detail: str) -> None:
        took = time.monotonic() - self._started.get(number, time.monotonic())
        color = {"COMPLETE": "green", "PRUNED": "yellow", "FAIL": "red"}.get(state, "white")
        # detail may quote an engine's log ("[rank0]: ..."): text, not markup
        self.console.log(f"trial {number} [{color}]{state}[/] in {took:.0f}s: {escape(detail)}")


def pareto_table(results: StudyResults) -> Table | None:
    """The study's best trials (``results.select.best_trials``: the feasible Pareto front, best first)."""
    best = best_trials(results)
    if not best:
        return None
    table = Table(title=f"Pareto-optimal trials of {results.study_name}")
    table.add_column("trial", justify="right")
    table.add_column("role")
    for o in results.objectives:
        table.add_column(f"{o.name} {'↑' if o.maximize else '↓'}", justify="right")
    table.add_column("GPUs", justify="right")
    table.add_column("peak tok/s per GPU", justify="right")
    table.add_column("configuration")
    for t in best:
        table.add_row(
            t.key,
            t.role,
            *(f"{v:.4g}" for v in t.values or ()),
            str(t.gpus),
            _fmt(t.peak_throughput_per_gpu),
            (t.config.label() if t.config else "")
            + (
                f" [client-bound at {', '.join(map(str, t.client_bound_levels))}]"
                if t.client_bound_levels
                else ""
            ),
        )
    return table


def outcome_table(results: StudyResults) -> Table:
    table = Table(title=f"trials of {results.study_name}")
    for col in ("trial", "state", "values / reason"):
        table.add_column(col)
    for t in results.trials:
        if t.state == "COMPLETE":
            detail = ", ".join(f"{v:.4g}" for v in t.values or ())
        else:
            detail = f"{t.reason or ''}: {t.message or ''}"[:160]
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
