"""Rich progress for long runs: the trial, the level, the state and the elapsed time; and the final
table of Pareto-optimal trials."""

from __future__ import annotations

import time

import optuna
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from nova_search.space import ROLE_ATTR
from nova_search.trial import A_CONFIG, A_MESSAGE, A_REASON, describe_dict


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
        self.console.log(f"trial {number}: {label}")
        self.progress.reset(self._task, description=f"trial {number}/{self.total} · sampling")

    def phase(self, number: int, text: str) -> None:
        self.progress.update(self._task, description=f"trial {number}/{self.total} · {text}")

    def trial_finished(self, number: int, state: str, detail: str) -> None:
        took = time.monotonic() - self._started.get(number, time.monotonic())
        color = {"COMPLETE": "green", "PRUNED": "yellow", "FAIL": "red"}.get(state, "white")
        self.console.log(f"trial {number} [{color}]{state}[/] in {took:.0f}s: {detail}")


def pareto_table(study: optuna.Study) -> Table | None:
    best = study.best_trials
    if not best:
        return None
    names = study.metric_names or [f"value{i}" for i in range(len(study.directions))]
    table = Table(title=f"Pareto-optimal trials of {study.study_name}")
    table.add_column("trial", justify="right")
    table.add_column("role")
    for n, d in zip(names, study.directions, strict=True):
        arrow = "↑" if d == optuna.study.StudyDirection.MAXIMIZE else "↓"
        table.add_column(f"{n} {arrow}", justify="right")
    table.add_column("configuration")
    for t in sorted(best, key=lambda t: t.number):
        table.add_row(
            str(t.number),
            str(t.user_attrs.get(ROLE_ATTR, "search")),
            *(f"{v:.4g}" for v in t.values),
            describe_dict(t.user_attrs.get(A_CONFIG, {})),
        )
    return table


def outcome_table(study: optuna.Study) -> Table:
    table = Table(title="trials")
    for col in ("trial", "state", "values / reason"):
        table.add_column(col)
    for t in study.get_trials(deepcopy=False):
        if t.state == optuna.trial.TrialState.COMPLETE:
            detail = ", ".join(f"{v:.4g}" for v in t.values)
        else:
            detail = f"{t.user_attrs.get(A_REASON, '')}: {t.user_attrs.get(A_MESSAGE, '')}"[:160]
        table.add_row(str(t.number), t.state.name, detail)
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
