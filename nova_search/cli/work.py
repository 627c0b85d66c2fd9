"""Commands that set a study up and run it: run, create, worker, node, db (the models they serve are
made by ``make``: tiny-model, trained-model; a spec is checked, and a running server measured, by
``check``: validate, bench).

Precedence, lowest first: defaults < environment (NOVA_STORAGE, NOVA_ENGINE_PYTHON) < spec file <
flags (--set, --storage, --study-name, --n-trials).
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Annotated

import typer

from nova_search.cli._common import (
    MAX_GPU_ID,
    SetOpt,
    StorageOpt,
    StudyNameOpt,
    app,
    bounded_number,
    choice,
    console,
    err_console,
    parse_ints,
    storage_url,
    writable_storage,
)
from nova_search.errors import SpecError
from nova_search.search.cores import check_host_cores
from nova_search.spec import StudySpec, load_spec

StopAfterOpt = Annotated[
    float | None,
    typer.Option(
        "--stop-after",
        help="Start no new trial after this many seconds (running trials finish); for time-slotted machines.",
    ),
]
GpusOpt = Annotated[
    str | None, typer.Option("--gpus", envvar="NOVA_GPUS", help="GPUs this worker owns, e.g. 0,1.")
]
ArtifactsOpt = Annotated[str | None, typer.Option("--artifacts-dir", help="Where server logs go.")]
LogFormatOpt = Annotated[
    str,
    typer.Option(
        "--log-format",
        help="text (progress and tables for a person) or json (one JSON event per line on stdout: trial "
        "started, level measured, trial ended; see docs/events.md; the tables go to stderr).",
    ),
]
MaxTrialsOpt = Annotated[
    int | None, typer.Option("--max-trials", help="Stop a worker after this many trials of its own.")
]

#: exit code of a worker whose study ended with nothing measured
NOTHING_MEASURED = 3


#: the longest --stop-after: 30 days
MAX_STOP_AFTER_S = 30 * 86_400
#: the most trials --max-trials takes (a budget's own bound)
MAX_TRIALS = 1_000_000


def _parse_gpus(text: str | None) -> tuple[int, ...]:
    from nova_search.search.placement import gpu_set

    return gpu_set(parse_ints(text, "--gpus", "0,1", maximum=MAX_GPU_ID))


def _check_flags(
    stop_after: float | None = None, max_trials: int | None = None, artifacts_dir: str | None = None
) -> None:
    """The flags of the commands that run a study, checked before any storage is opened (a refused flag
    leaves no database file behind): the numbers in range, and ``--artifacts-dir`` a folder (or one
    to make), never a file, a FIFO or a device, which would fail every trial."""
    bounded_number("--stop-after", stop_after, 1, MAX_STOP_AFTER_S, " seconds")
    bounded_number("--max-trials", max_trials, 1, MAX_TRIALS)
    if artifacts_dir is not None:
        from nova_search.files import special_file
        from nova_search.redact import control_character

        c = control_character(artifacts_dir)
        if c is not None or not artifacts_dir.strip():
            raise SpecError(
                f"--artifacts-dir: {'is empty' if c is None else f'holds a control character ({c})'}"
            )
        kind = special_file(artifacts_dir, folder_ok=True)
        if kind is not None:
            raise SpecError(
                f"--artifacts-dir {artifacts_dir}: {kind}, not a folder; give a folder (made if missing)"
            )


def _engine_here(spec: StudySpec) -> None:
    """``run`` runs a worker here: a spec that names no engine this host can launch is refused before
    the study is written (``worker`` checks the stored spec the same way, at its first trial)."""
    if spec.engine.command is None and spec.engine.resolved_python() is None:
        raise SpecError(
            "engine.python is not set: give engine.python (an interpreter that has vLLM), engine.command "
            "(e.g. [vllm, serve]) or the NOVA_ENGINE_PYTHON environment variable"
        )


def _interrupt_on_sigterm() -> None:
    """SIGTERM behaves like Ctrl-C: the running trial is torn down and ends FAIL ("interrupted").
    Later SIGTERMs are ignored: the worker is already stopping, and Python's exit would otherwise put
    the default action back and let one kill it before its exit code is out."""

    def handler(signum: int, frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


def _quiet_optuna() -> None:
    """Optuna's INFO lines ("A new study created in RDB ...") are not the user's business here; its
    warnings still show. Set in the CLI only: a library leaves the caller's logging alone."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)


def _log_format(text: str) -> str:
    return choice("--log-format", text, ("text", "json"))


def _work(
    study_name: str,
    url: str,
    spec: StudySpec,
    max_trials: int | None,
    gpus: tuple[int, ...],
    artifacts_dir: str | None,
    stop_after: float | None = None,
    log_format: str = "text",
) -> None:
    import contextlib
    import shlex
    import sys

    from nova_search import redact
    from nova_search.db import mask, storage_retry_s
    from nova_search.report.dashboard.publish import after_stage, after_trial
    from nova_search.report.policy import answer_summary
    from nova_search.report.progress import JsonReporter, RichReporter, outcome_table, pareto_table
    from nova_search.results.deploy import deploy_answer
    from nova_search.results.load import load_results
    from nova_search.worker.loop import WorkerOptions
    from nova_search.worker.stage_loop import run_stages

    # with --log-format json, stdout holds the events only: what a person reads goes to stderr
    out = err_console if log_format == "json" else console
    stages = f" in stages {' -> '.join(spec.stages)}" if spec.staged else ""
    out.print(
        f"study [bold]{study_name}[/] in {mask(url)}: budget {spec.budget.n_trials} trials"
        + (" per stage" if spec.staged else "")
        + stages
    )
    _interrupt_on_sigterm()
    objectives = [(o.name, o.direction == "maximize") for o in spec.objectives]
    reporting: contextlib.AbstractContextManager = (
        contextlib.nullcontext(JsonReporter(sys.stdout, study_name))
        if log_format == "json"
        else RichReporter(console, spec.budget.n_trials, objectives, spec.level_name)
    )
    with reporting as reporter:
        try:
            _last, ran = run_stages(
                study_name,
                url,
                WorkerOptions(
                    max_trials=max_trials,
                    gpus=gpus,
                    artifacts_dir=artifacts_dir,
                    reporter=reporter,
                    stop_after_s=stop_after,
                    on_trial_done=after_trial,
                    on_stage_done=after_stage,
                ),
            )
        except KeyboardInterrupt:
            err_console.print("interrupted: the running trial was stopped and recorded as FAIL")
            raise typer.Exit(130) from None
    if isinstance(reporter, JsonReporter):
        reporter.exited(ran)
    results = load_results(study_name, url, retry_s=storage_retry_s())
    out.print(outcome_table(results))
    table = pareto_table(results)
    states = {t.state for t in results.trials}
    if table is not None:
        out.print(table)
    elif "COMPLETE" in states:
        out.print("[yellow]No trial met every constraint: no feasible Pareto front yet.[/]")
    elif states & {"RUNNING", "WAITING"}:
        out.print("Nothing measured yet: other workers' trials are still running.")
    elif stopped := sum(1 for t in results.trials if t.state == "PRUNED" and t.levels):
        out.print(
            f"[yellow]No trial completed: {stopped} measured trial(s) were stopped early (early_stop); "
            "their levels and reasons are above. No Pareto front yet.[/]"
        )
    else:
        err_console.print(
            "[red]Every trial of this study failed or was pruned; nothing was measured.[/] "
            "See the reasons above and each trial's note (nova-search dashboard)."
        )
        raise typer.Exit(NOTHING_MEASURED)
    # the last screen is the answer: the table above ranks trials, its top row need not be what to run
    answer = deploy_answer(results)
    out.print(redact.terminal_safe(answer_summary(answer)), markup=False, highlight=False, soft_wrap=True)
    policy = f"nova-search policy {study_name} --storage {shlex.quote(mask(url))}"
    out.print(
        f"why, the evidence and the other loads: {policy}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


@app.command()
def run(
    spec_path: Annotated[str, typer.Argument(metavar="SPEC.yaml", help="The study spec.")],
    storage: StorageOpt = None,
    study_name: StudyNameOpt = None,
    n_trials: Annotated[
        int | None, typer.Option("--n-trials", min=1, help="Trial budget (overrides budget.n_trials).")
    ] = None,
    set_: SetOpt = None,
    gpus: GpusOpt = None,
    artifacts_dir: ArtifactsOpt = None,
    stop_after: StopAfterOpt = None,
    log_format: LogFormatOpt = "text",
) -> None:
    """Create (or continue) a study and run it with one local worker."""
    fmt = _log_format(log_format)
    overrides = list(set_ or [])
    if n_trials is not None:
        overrides.append(f"budget.n_trials={n_trials}")
    _check_flags(stop_after, artifacts_dir=artifacts_dir)
    gpu_ids = _parse_gpus(gpus)
    spec = load_spec(spec_path, overrides)
    url = writable_storage(storage_url(storage, spec))
    name = _study_name(study_name, spec)
    check_host_cores(spec)
    _engine_here(spec)
    # the search stack (Optuna, SQLAlchemy) is loaded once the input is known good: bad input is
    # refused in half a second
    from nova_search.search.lifecycle import create

    _quiet_optuna()
    study = create(spec, url, name, exist_ok=True)
    stored = _stored_spec(study, spec)
    check_host_cores(stored)
    if stored.budget != spec.budget:
        _budget_kept(name, stored, spec, n_trials)
    _work(name, url, stored, None, gpu_ids, artifacts_dir, stop_after, fmt)


def _stored_spec(study: object, given: StudySpec) -> StudySpec:
    """The spec the study stores (what every worker runs); ``given`` when it stores none."""
    from nova_search import schema
    from nova_search.spec import parse_spec

    raw = schema.SPEC.read(study.user_attrs)  # type: ignore[attr-defined]
    return given if raw is None else parse_spec(raw, "the stored spec")


def _budget_kept(name: str, stored: StudySpec, given: StudySpec, n_trials: int | None) -> None:
    """``run`` on a study that exists runs the budget it stores: every worker counts against that one,
    and a run cannot change it for the others. An explicit ``--n-trials`` that differs is refused (exit
    2, nothing run): the user asked for a budget that would not be kept. A budget that differs in the
    spec file or a ``--set`` is a note on stderr; the stored budget is the one printed and run."""
    kept = stored.budget.n_trials
    if n_trials is not None and n_trials != kept:
        raise SpecError(
            f"--n-trials {n_trials}: study {name!r} exists with a budget of {kept} trials, which every "
            "worker counts against; a run does not change it. Run without --n-trials to continue it, or "
            "create a study under another name (--study-name) with the budget you want"
        )
    err_console.print(
        f"note: study {name} exists: its stored budget ({kept} trials"
        + (f", per stage {dict(stored.budget.per_stage)}" if stored.budget.per_stage else "")
        + f") is kept; the spec's ({given.budget.n_trials}) applies to a new study only",
        highlight=False,
    )


def _study_name(flag: str | None, spec: StudySpec) -> str:
    from nova_search.spec import check_study_name

    return check_study_name(flag, "--study-name") if flag is not None else spec.name


@app.command("create")
def create_cmd(
    spec_path: Annotated[str, typer.Argument(metavar="SPEC.yaml", help="The study spec.")],
    storage: StorageOpt = None,
    study_name: StudyNameOpt = None,
    set_: SetOpt = None,
) -> None:
    """Create a study once (directions, metric names, spec, baselines); workers then load it."""
    spec = load_spec(spec_path, list(set_ or []))
    url = writable_storage(storage_url(storage, spec))
    name = _study_name(study_name, spec)
    from nova_search.db import mask
    from nova_search.search.lifecycle import create

    _quiet_optuna()
    created = create(spec, url, name)
    if spec.staged:
        console.print(
            f"created study {name} in {mask(url)}: stages {' -> '.join(spec.stages)} "
            f"(Optuna studies {', '.join(f'{name}.{st}' for st in spec.stages)}; "
            f"{created.study_name} now, the next when its budget is spent)"
        )
    else:
        console.print(f"created study {name} in {mask(url)}")


@app.command()
def worker(
    study: Annotated[str, typer.Argument(metavar="STUDY", envvar="NOVA_STUDY", help="The study name.")],
    storage: StorageOpt = None,
    gpus: GpusOpt = None,
    max_trials: MaxTrialsOpt = None,
    artifacts_dir: ArtifactsOpt = None,
    stop_after: StopAfterOpt = None,
    log_format: LogFormatOpt = "text",
) -> None:
    """Run trials of an existing study until its budget (counted across all workers) is met."""
    from nova_search.search.lifecycle import load

    fmt = _log_format(log_format)
    _check_flags(stop_after, max_trials, artifacts_dir)
    gpu_ids = _parse_gpus(gpus)
    _quiet_optuna()
    url = writable_storage(storage_url(storage, None))
    _loaded, spec = load(study, url)
    check_host_cores(spec)
    _work(study, url, spec, max_trials, gpu_ids, artifacts_dir, stop_after, fmt)


@app.command()
def node(
    study: Annotated[str, typer.Argument(metavar="STUDY", envvar="NOVA_STUDY", help="The study name.")],
    gpus: Annotated[
        str, typer.Option("--gpus", envvar="NOVA_GPUS", help="The node's GPUs, split among its workers: 0,1.")
    ],
    gpus_per_worker: Annotated[
        int,
        typer.Option(
            "--gpus-per-worker",
            help="GPUs each worker owns (1: a worker per GPU; 2 for trials of tensor_parallel_size 2).",
        ),
    ] = 1,
    storage: StorageOpt = None,
    max_trials: MaxTrialsOpt = None,
    artifacts_dir: ArtifactsOpt = None,
    stop_after: StopAfterOpt = None,
    grace: Annotated[
        float,
        typer.Option("--grace", help="Seconds a stopped worker has to record its trial before it is killed."),
    ] = 60.0,
    log_format: LogFormatOpt = "text",
) -> None:
    """Run one worker per GPU (or group of GPUs) of this node on one study; Ctrl-C or SIGTERM stops all."""
    import os

    from nova_search import schema
    from nova_search.search.lifecycle import load
    from nova_search.search.placement import place
    from nova_search.worker.node import NodeWorker, run_node, worker_argv, worker_groups

    fmt = _log_format(log_format)
    _check_flags(stop_after, max_trials, artifacts_dir)
    bounded_number("--grace", grace, 1, 3600, " seconds")
    bounded_number("--gpus-per-worker", gpus_per_worker, 1, 64)
    groups = worker_groups(_parse_gpus(gpus), gpus_per_worker)
    _quiet_optuna()
    url = writable_storage(storage_url(storage, None))
    loaded, spec = load(study, url)
    check_host_cores(spec)
    attrs = loaded.user_attrs
    base = schema.BASE.read(attrs)
    for group in groups:  # a group that fits no trial of the study is refused here, before any starts
        place(group, spec, schema.stage_of(attrs), base.config if base else None)
    options = [
        *(["--max-trials", str(max_trials)] if max_trials is not None else []),
        *(["--artifacts-dir", artifacts_dir] if artifacts_dir else []),
        *(["--stop-after", str(stop_after)] if stop_after is not None else []),
        *(["--log-format", fmt] if fmt != "text" else []),
    ]
    workers = [NodeWorker(g, worker_argv(study, g, options)) for g in groups]
    log_dir = Path(artifacts_dir or spec.artifacts_dir) / study / "node"
    console.print(f"node: {len(workers)} workers on study {study}: " + "; ".join(w.label for w in workers))
    # the storage URL (with its password) travels in the environment, never in a worker's argv
    env = {**os.environ, "NOVA_STORAGE": url}
    raise typer.Exit(run_node(workers, log_dir, env=env, grace_s=grace))


db_app = typer.Typer(help="nova's own tables (alembic). Creating a study runs `db upgrade` itself.")
app.add_typer(db_app, name="db")


@db_app.command("upgrade")
def db_upgrade(
    storage: StorageOpt = None,
    revision: Annotated[str, typer.Option("--revision", help="Target revision.")] = "head",
) -> None:
    """Create Optuna's schema when missing, then migrate nova's tables (nova_alembic_version)."""
    from nova_search.db import current, mask, upgrade

    url = writable_storage(storage_url(storage, None))
    upgrade(url, revision)
    console.print(f"{mask(url)}: nova tables at revision {current(url)}")


@db_app.command("downgrade")
def db_downgrade(
    revision: Annotated[str, typer.Argument(help="Target revision, e.g. base.")],
    storage: StorageOpt = None,
) -> None:
    """Migrate nova's tables down (Optuna's tables are never touched)."""
    from nova_search.db import current, downgrade, mask

    url = writable_storage(storage_url(storage, None))
    downgrade(url, revision)
    console.print(f"{mask(url)}: nova tables at revision {current(url)}")
