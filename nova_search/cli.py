"""The command line. Thin: each command parses options, calls one function, and is the only place
that turns a ``NovaError`` into a message and an exit code (2: bad input, 1: anything else).

Precedence, lowest first: defaults < environment (NOVA_STORAGE, NOVA_ENGINE_PYTHON) < spec file <
flags (--set, --storage, --study-name, --n-trials).
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console

from nova_search.errors import NovaError, SpecError
from nova_search.spec import StudySpec, load_spec

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="nova-search: find the best vLLM serving configuration with Optuna.",
)
console = Console(log_path=False)
err_console = Console(stderr=True)

StorageOpt = Annotated[
    str | None,
    typer.Option(
        "--storage",
        envvar="NOVA_STORAGE",
        help="SQLAlchemy URL of the study storage. Default: the spec's storage, else sqlite:///nova.db.",
    ),
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set", help="Override a spec field before validation: dotted.key=value (YAML value). Repeatable."
    ),
]
StudyNameOpt = Annotated[
    str | None, typer.Option("--study-name", help="Study name. Default: the spec's name.")
]
StopAfterOpt = Annotated[
    float | None,
    typer.Option(
        "--stop-after",
        min=1,
        help="Start no new trial after this many seconds (running trials finish); for time-slotted machines.",
    ),
]
GpusOpt = Annotated[
    str | None, typer.Option("--gpus", envvar="NOVA_GPUS", help="GPUs this worker owns, e.g. 0,1.")
]


def _fail(e: NovaError) -> NoReturn:
    err_console.print(f"[red]error:[/] {e}", markup=True, highlight=False, soft_wrap=True)
    raise typer.Exit(2 if isinstance(e, SpecError) else 1)


def _guard(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except NovaError as e:
        _fail(e)


def _storage_url(flag: str | None, spec: StudySpec | None) -> str:
    from nova_search.study import DEFAULT_STORAGE

    return flag or (spec.storage if spec and spec.storage else None) or DEFAULT_STORAGE


def _parse_ints(text: str | None, flag: str, example: str, *, required: bool = False) -> tuple[int, ...]:
    """A comma-separated list of integers >= 0 (> 0 when ``required``, which also forbids an empty list)."""
    bad = SpecError(
        f"{flag} {text!r}: give {'positive ' if required else ''}integers separated by commas, e.g. {example}"
    )
    try:
        values = tuple(int(x) for x in (text or "").split(",") if x.strip())
    except ValueError:
        raise bad from None
    if any(v < (1 if required else 0) for v in values) or (required and not values):
        raise bad
    return values


def _parse_gpus(text: str | None) -> tuple[int, ...]:
    return _parse_ints(text, "--gpus", "0,1")


def _interrupt_on_sigterm() -> None:
    """SIGTERM behaves like Ctrl-C: the running trial is torn down and ends FAIL ("interrupted")."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


def _work(
    study_name: str,
    storage_url: str,
    spec: StudySpec,
    max_trials: int | None,
    gpus: tuple[int, ...],
    artifacts_dir: str | None,
    stop_after: float | None = None,
) -> None:
    from nova_search.progress import RichReporter, outcome_table, pareto_table
    from nova_search.study import WorkerOptions, mask_url, run_stages

    stages = f" in stages {' -> '.join(spec.stages)}" if spec.staged else ""
    console.print(
        f"study [bold]{study_name}[/] in {mask_url(storage_url)}: budget {spec.budget.n_trials} trials"
        + (" per stage" if spec.staged else "")
        + stages
    )
    _interrupt_on_sigterm()
    with RichReporter(console, spec.budget.n_trials) as reporter:
        try:
            study, _ran = run_stages(
                study_name,
                storage_url,
                WorkerOptions(
                    max_trials=max_trials,
                    gpus=gpus,
                    artifacts_dir=artifacts_dir,
                    reporter=reporter,
                    stop_after_s=stop_after,
                ),
            )
        except KeyboardInterrupt:
            err_console.print("interrupted: the running trial was stopped and recorded as FAIL")
            raise typer.Exit(130) from None
    if spec.staged:
        console.print(f"[bold]{study.study_name}[/] (stage {study.user_attrs.get('nova:stage')}):")
    console.print(outcome_table(study))
    table = pareto_table(study)
    if table is not None:
        console.print(table)
    elif any(t.state.name == "COMPLETE" for t in study.get_trials(deepcopy=False)):
        console.print("[yellow]No trial met every constraint: no feasible Pareto front yet.[/]")
    else:
        err_console.print(
            "[red]Every trial of this study failed or was pruned; nothing was measured.[/] "
            "See the reasons above and each trial's nova:log_tail attribute."
        )
        raise typer.Exit(3)
    if spec.staged:
        console.print(f"verdict and deployment policy: nova-search policy {study_name} --storage ...")


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
    artifacts_dir: Annotated[
        str | None, typer.Option("--artifacts-dir", help="Where server logs go.")
    ] = None,
    stop_after: StopAfterOpt = None,
) -> None:
    """Create (or continue) a study and run it with one local worker."""
    from nova_search.study import create

    overrides = list(set_ or [])
    if n_trials is not None:
        overrides.append(f"budget.n_trials={n_trials}")
    spec = _guard(lambda: load_spec(spec_path, overrides))
    gpu_ids = _guard(lambda: _parse_gpus(gpus))
    url = _storage_url(storage, spec)
    name = study_name or spec.name
    _guard(lambda: create(spec, url, name, exist_ok=True))
    _guard(lambda: _work(name, url, spec, None, gpu_ids, artifacts_dir, stop_after))


@app.command("create")
def create_cmd(
    spec_path: Annotated[str, typer.Argument(metavar="SPEC.yaml", help="The study spec.")],
    storage: StorageOpt = None,
    study_name: StudyNameOpt = None,
    set_: SetOpt = None,
) -> None:
    """Create a study once (directions, metric names, spec, baselines); workers then load it."""
    from nova_search.study import create, mask_url

    spec = _guard(lambda: load_spec(spec_path, list(set_ or [])))
    url = _storage_url(storage, spec)
    name = study_name or spec.name
    created = _guard(lambda: create(spec, url, name))
    if spec.staged:
        console.print(
            f"created study {name} in {mask_url(url)}: stages {' -> '.join(spec.stages)} "
            f"(Optuna studies {', '.join(f'{name}.{st}' for st in spec.stages)}; "
            f"{created.study_name} now, the next when its budget is spent)"
        )
    else:
        console.print(f"created study {name} in {mask_url(url)}")


@app.command()
def worker(
    study: Annotated[str, typer.Argument(metavar="STUDY", envvar="NOVA_STUDY", help="The study name.")],
    storage: StorageOpt = None,
    gpus: GpusOpt = None,
    max_trials: Annotated[
        int | None, typer.Option("--max-trials", min=1, help="Stop after this many trials here.")
    ] = None,
    artifacts_dir: Annotated[
        str | None, typer.Option("--artifacts-dir", help="Where server logs go.")
    ] = None,
    stop_after: StopAfterOpt = None,
) -> None:
    """Run trials of an existing study until its budget (counted across all workers) is met."""
    from nova_search.study import load

    url = _storage_url(storage, None)
    gpu_ids = _guard(lambda: _parse_gpus(gpus))
    _loaded, spec = _guard(lambda: load(study, url))
    _guard(lambda: _work(study, url, spec, max_trials, gpu_ids, artifacts_dir, stop_after))


db_app = typer.Typer(help="nova's own tables (alembic). Creating a study runs `db upgrade` itself.")
app.add_typer(db_app, name="db")


@db_app.command("upgrade")
def db_upgrade(
    storage: StorageOpt = None,
    revision: Annotated[str, typer.Option("--revision", help="Target revision.")] = "head",
) -> None:
    """Create Optuna's schema when missing, then migrate nova's tables (nova_alembic_version)."""
    from nova_search.db import current, upgrade
    from nova_search.study import mask_url

    url = _storage_url(storage, None)
    _guard(lambda: upgrade(url, revision))
    console.print(f"{mask_url(url)}: nova tables at revision {_guard(lambda: current(url))}")


@db_app.command("downgrade")
def db_downgrade(
    revision: Annotated[str, typer.Argument(help="Target revision, e.g. base.")],
    storage: StorageOpt = None,
) -> None:
    """Migrate nova's tables down (Optuna's tables are never touched)."""
    from nova_search.db import current, downgrade
    from nova_search.study import mask_url

    url = _storage_url(storage, None)
    _guard(lambda: downgrade(url, revision))
    console.print(f"{mask_url(url)}: nova tables at revision {_guard(lambda: current(url))}")


@app.command()
def bench(
    url: Annotated[str, typer.Option("--url", help="Base URL of a running OpenAI-compatible server.")],
    concurrency: Annotated[str, typer.Option("--concurrency", help="Levels, e.g. 1,8,32.")],
    api_key: Annotated[str | None, typer.Option("--api-key", envvar="NOVA_BENCH_API_KEY")] = None,
    model: Annotated[
        str | None, typer.Option("--model", help="Served model name (default: /v1/models).")
    ] = None,
    input_len: Annotated[int, typer.Option("--input-len", min=1)] = 128,
    output_len: Annotated[int, typer.Option("--output-len", min=1)] = 64,
    num_requests: Annotated[int | None, typer.Option("--num-requests", min=1)] = None,
    duration: Annotated[float | None, typer.Option("--duration", min=0.1, help="Seconds per level.")] = None,
    warmup: Annotated[int, typer.Option("--warmup", min=0, help="Warmup requests per level.")] = 4,
    vocab_size: Annotated[
        int, typer.Option("--vocab-size", min=11, help="Prompt token ids are drawn below this.")
    ] = 1000,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    cpus: Annotated[
        str | None,
        typer.Option("--cpus", help="Cores the load generator runs on, as taskset takes them: 1, 8-15, 0,2."),
    ] = None,
    processes: Annotated[
        str,
        typer.Option(
            "--processes",
            help="Client processes per level, or auto (from --cpus and the expected rate; 1 without --cpus).",
        ),
    ] = "auto",
    usage: Annotated[
        str,
        typer.Option(
            "--usage",
            help="Usage in the stream: auto (per chunk only when the warmup shows chunks of several "
            "tokens), per-chunk (exact tokens per chunk), final (as vllm bench serve asks).",
        ),
    ] = "auto",
    preconnect: Annotated[
        bool,
        typer.Option(
            "--preconnect/--no-preconnect",
            help="Open every connection before the window (--no-preconnect: as vllm bench serve does).",
        ),
    ] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print the profile as JSON.")] = False,
    json_names: Annotated[
        str,
        typer.Option(
            "--json-names",
            help="Keys of --json: nova (LevelResult fields) or vllm (vllm bench serve --save-result keys).",
        ),
    ] = "nova",
) -> None:
    """Measure an already-running server with nova's load generator and print the profile per level."""
    import json

    from nova_search.bench import BenchPlan, run_bench, vllm_names
    from nova_search.spec import WorkloadSpec

    levels = _guard(lambda: _parse_levels(concurrency))
    if (num_requests is None) == (duration is None):
        _fail(SpecError("give exactly one of --num-requests or --duration"))
    pinned = _guard(lambda: _parse_cores(cpus, "--cpus")) or None
    n_processes = _guard(lambda: _parse_processes(processes))
    per_chunk = {"auto": None, "per-chunk": True, "final": False}[
        _guard(lambda: _choice("--usage", usage, ("auto", "per-chunk", "final")))
    ]
    names = _guard(lambda: _choice("--json-names", json_names, ("nova", "vllm")))
    plan = BenchPlan(
        url=url,
        concurrency=levels,
        cpus=pinned,
        processes=n_processes,
        per_chunk_usage=per_chunk,
        preconnect=preconnect,
        api_key=api_key,
        model=model,
        num_requests=num_requests,
        duration_s=duration,
        warmup_requests=warmup,
        vocab_size=vocab_size,
        workload=WorkloadSpec(input_len=input_len, output_len=output_len, seed=seed),
    )
    results = _guard(lambda: run_bench(plan))
    if as_json:
        rows = [vllm_names(r) if names == "vllm" else r.as_dict() for r in results]
        print(json.dumps(rows, indent=2))
        return
    from nova_search.progress import profile_table

    console.print(profile_table(results, title=f"nova-search bench {url}"))
    for r in results:
        if r.client_note:
            console.print(f"concurrency {r.concurrency}: {r.client_note}", highlight=False)


def _parse_cores(text: str | None, flag: str) -> tuple[int, ...]:
    """A taskset-style core list (``8-15``, ``0,2,4-7``); empty for None."""
    from nova_search.spec import parse_cores

    if not text:
        return ()
    try:
        return tuple(parse_cores(text))
    except ValueError as e:
        raise SpecError(f"{flag} {text!r}: {e}; e.g. 1 or 8-15 or 0,2,4-7") from None


def _parse_processes(text: str) -> int | None:
    if text == "auto":
        return None
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise SpecError(f"--processes {text!r}: give a positive integer or auto")
    return n


def _parse_levels(text: str) -> tuple[int, ...]:
    return _parse_ints(text, "--concurrency", "1,8,32", required=True)


@app.command()
def validate(
    spec_path: Annotated[str, typer.Argument(metavar="SPEC.yaml")],
    set_: SetOpt = None,
) -> None:
    """Validate a spec (with overrides) and print it as the study will store it."""
    import yaml

    spec = _guard(lambda: load_spec(spec_path, list(set_ or [])))
    console.print(yaml.safe_dump(spec.model_dump(mode="json"), sort_keys=False), highlight=False)


@app.command("tiny-model")
def tiny_model(
    out_dir: Annotated[str, typer.Argument(metavar="DIR", help="Folder to write the model into.")],
) -> None:
    """Build the tiny local model (Llama shape, local tokenizer; serve with --load-format dummy)."""
    from nova_search.tinymodel import build_tiny_model

    path = build_tiny_model(out_dir)
    console.print(f"tiny model written to {path} (EAGLE-3 drafter in {path / 'eagle3'})")


# ---------------------------------------------------------------- inspect and consume the results
# (best, export, status, report: read-only commands over nova_search.api)

BEST_FORMATS = ("json", "argv", "yaml")


def _choice(flag: str, value: str, valid: tuple[str, ...]) -> str:
    if value not in valid:
        raise SpecError(f"{flag} {value!r}: valid values are {', '.join(valid)}")
    return value


def _conditions(where: list[str] | None) -> list[Any]:
    from nova_search.api import parse_condition

    out = []
    for text in where or []:
        try:
            out.append(parse_condition(text))
        except SpecError as e:
            raise SpecError(f"--where: {e}") from None
    return out


def _objective(text: str | None, results: Any) -> Any:
    from nova_search.api import resolve_objective

    if text is None:
        return None
    try:
        return resolve_objective(text, results.objectives if results is not None else ())
    except SpecError as e:
        valid = ", ".join(o.name for o in results.objectives) if results is not None else ""
        hint = f" (this study's objectives: {valid})" if valid else ""
        raise SpecError(f"--objective: {e}{hint}") from None


def _emit(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


POLICY_FORMATS = ("table", "json", "yaml")


@app.command("policy")
def policy_cmd(
    study: Annotated[str, typer.Argument(metavar="STUDY", help="The study name (staged: its own name).")],
    storage: StorageOpt = None,
    fmt: Annotated[str, typer.Option("--format", help="table, json or yaml.")] = "table",
) -> None:
    """The speculative verdict per drafter and concurrency, and the deployment policy: which
    configuration to run in each concurrency range (speculation only where it is verified better)."""
    import json

    import yaml
    from rich.table import Table

    from nova_search.api import dumps_json, load_results, verdict_of
    from nova_search.report.policy import (
        DRAFTER_HEADERS,
        POLICY_HEADERS,
        TRADEOFF_HEADERS,
        drafter_rows,
        header_lines,
        policy_rows,
        tradeoff_rows,
        verdict_json,
    )

    _guard(lambda: _choice("--format", fmt, POLICY_FORMATS))
    results = _guard(lambda: load_results(study, _storage_url(storage, None)))
    verdict = _guard(lambda: verdict_of(results))
    if fmt != "table":
        text = dumps_json(verdict_json(verdict, study))
        _emit(text if fmt == "json" else yaml.safe_dump(json.loads(text), sort_keys=False, width=1000))
        return

    def table(title: str, headers: list[str], rows: list[list[str]]) -> Table:
        t = Table(title=title, title_justify="left")
        for h in headers:
            t.add_column(h, overflow="fold")
        for r in rows:
            t.add_row(*r)
        return t

    for line in header_lines(verdict):
        console.print(line)
    if verdict.drafters:
        console.print(table("Drafters", DRAFTER_HEADERS, drafter_rows(verdict)))
    for d in verdict.drafters:
        if d.tradeoffs:
            console.print(table(f"Latency tradeoffs: {d.method}", TRADEOFF_HEADERS, tradeoff_rows(d)))
    rows = policy_rows(verdict)
    console.print(table("Deployment policy", POLICY_HEADERS[:-1], [r[:-1] for r in rows]))
    for r in rows:
        console.print(f"[bold]{r[0]}[/] ({r[1]}):", markup=True)
        console.print("  " + r[-1], markup=False, soft_wrap=True)
    if verdict.schedule:
        console.print(
            "dynamic schedule (num_speculative_tokens_per_batch_size): "
            + json.dumps([list(x) for x in verdict.schedule])
            + f" ({verdict.schedule_note})"
        )
    for note in verdict.notes:
        console.print(f"[yellow]{note}[/]")


@app.command("best")
def best_cmd(
    study: Annotated[str, typer.Argument(metavar="STUDY", help="The study name.")],
    storage: StorageOpt = None,
    objective: Annotated[
        str | None,
        typer.Option(
            "--objective",
            help="Pick the single best by this metric: an objective (output_throughput@best) or "
            "metric@level (ttft_p99_ms@32). Default: the Pareto front.",
        ),
    ] = None,
    where: Annotated[
        list[str] | None,
        typer.Option(
            "--where", help="Keep trials where metric OP value[@level] holds, e.g. ttft_p99_ms<=500@32."
        ),
    ] = None,
    fmt: Annotated[
        str, typer.Option("--format", help="json, argv (the top trial's command) or yaml.")
    ] = "json",
) -> None:
    """The best feasible COMPLETE trials: the Pareto front, or the single best by --objective."""
    import shlex

    import yaml

    from nova_search.api import best_of, dumps_json, load_results, trial_dict

    _guard(lambda: _choice("--format", fmt, BEST_FORMATS))
    conditions = _guard(lambda: _conditions(where))
    _guard(lambda: _objective(objective, None))
    results = _guard(lambda: load_results(study, _storage_url(storage, None)))
    chosen = _guard(lambda: _objective(objective, results))
    found = best_of(results, objective=chosen, where=conditions)
    if not found:
        extra = f" with {' and '.join(str(c) for c in conditions)}" if conditions else ""
        _fail(NovaError(f"no feasible COMPLETE trial in study {study!r}{extra}"))
    if fmt == "argv":
        _emit(shlex.join(found[0].deployable_argv))
        return
    payload = [trial_dict(t, results.objectives) for t in found]
    _emit(dumps_json(payload) if fmt == "json" else yaml.safe_dump(payload, sort_keys=False))


@app.command("dump")
def dump_cmd(
    study: Annotated[str, typer.Argument(metavar="STUDY", help="The study name.")],
    storage: StorageOpt = None,
    output: Annotated[
        str | None, typer.Option("-o", "--output", help="Write the JSON here instead of stdout.")
    ] = None,
) -> None:
    """The whole study as JSON: every trial's params, values, per-level profile, timing, engine version
    and device (for archiving a study or feeding other tools)."""
    from nova_search.api import dumps_json, load_results, study_dict
    from nova_search.files import write_atomic

    results = _guard(lambda: load_results(study, _storage_url(storage, None)))
    text = dumps_json(study_dict(results))
    if output is None:
        _emit(text)
        return
    _guard(lambda: write_atomic(output, text + "\n"))
    console.print(f"wrote {output}")


@app.command("export")
def export_cmd(
    study: Annotated[str, typer.Argument(metavar="STUDY", help="The study name.")],
    storage: StorageOpt = None,
    trial: Annotated[
        int | None,
        typer.Option("--trial", help="Trial number. Default: the top feasible trial by the first objective."),
    ] = None,
    fmt: Annotated[str, typer.Option("--format", help="vllm (a command line), compose or k8s.")] = "vllm",
) -> None:
    """Print a trial's configuration ready to deploy: a vllm command, a compose service, a k8s Deployment."""
    from nova_search.api import EXPORT_FORMATS, export_launch, load_results, top_trial

    _guard(lambda: _choice("--format", fmt, EXPORT_FORMATS))
    results = _guard(lambda: load_results(study, _storage_url(storage, None)))
    if trial is None:
        chosen = top_trial(results)
        if chosen is None:
            _fail(NovaError(f"no feasible COMPLETE trial in study {study!r} to export; pick one: --trial"))
    else:
        try:
            chosen = results.trial(trial)
        except KeyError:
            _fail(NovaError(f"study {study!r} has no trial {trial}"))
    _emit(_guard(lambda: export_launch(chosen, fmt)))


@app.command("status")
def status_cmd(
    study: Annotated[str, typer.Argument(metavar="STUDY", help="The study name.")],
    storage: StorageOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the status as JSON.")] = False,
) -> None:
    """Trials by state, workers seen recently, the best so far per objective, and an ETA."""
    from dataclasses import asdict

    from nova_search.api import dumps_json, load_results
    from nova_search.status import status_lines, study_status

    results = _guard(lambda: load_results(study, _storage_url(storage, None)))
    st = study_status(results)
    if as_json:
        _emit(dumps_json(asdict(st) | {"remaining": st.remaining}))
        return
    _emit("\n".join(status_lines(st)))


@app.command("report")
def report_cmd(
    study: Annotated[str, typer.Argument(metavar="STUDY", help="The study name.")],
    storage: StorageOpt = None,
    output: Annotated[str, typer.Option("-o", "--output", help="The HTML file to write.")] = "report.html",
    gpu_hour_usd: Annotated[
        float | None,
        typer.Option("--gpu-hour-usd", help="Price of one GPU-hour (> 0), for cost per 1M tokens."),
    ] = None,
) -> None:
    """Write a self-contained HTML report: stock vs tuned, latency, Pareto, hypervolume, importances."""
    import math

    from nova_search.api import load_results
    from nova_search.report.data import build_report_data
    from nova_search.report.html import write_report

    if gpu_hour_usd is not None and not (math.isfinite(gpu_hour_usd) and gpu_hour_usd > 0):
        _fail(SpecError(f"--gpu-hour-usd {gpu_hour_usd!r}: give a price above 0, e.g. 2.5"))
    results = _guard(lambda: load_results(study, _storage_url(storage, None)))
    data = build_report_data(results, gpu_hour_usd=gpu_hour_usd)
    try:
        path = write_report(data, output)
    except OSError as e:
        _fail(NovaError(f"cannot write {output}: {e.strerror or e}"))
    summary = f"{len(data.trials)} trials, {len(data.notes)} notes on missing data"
    console.print(f"report written to {path} ({summary})", highlight=False)


@app.command("dashboard")
def dashboard_cmd(
    storage: StorageOpt = None,
    artifacts_dir: Annotated[
        str | None,
        typer.Option(
            "--artifacts-dir",
            help="The workers' artifacts folder (request records, server logs). Default: ./nova-artifacts "
            "when it exists.",
        ),
    ] = None,
    host: Annotated[str, typer.Option("--host", help="Address to listen on (no login: keep it local).")] = (
        "127.0.0.1"
    ),
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="Port to listen on.")] = 8080,
) -> None:
    """Serve optuna-dashboard on the study storage, with nova's notes, graphs and trial artifacts."""
    from nova_search.report.dashboard import open_dashboard, serve
    from nova_search.study import mask_url

    url = _storage_url(storage, None)
    opened, store, folder = _guard(lambda: open_dashboard(url, artifacts_dir))
    shown = f"artifacts from {folder}" if folder else "no artifacts folder (--artifacts-dir)"
    console.print(f"optuna-dashboard on http://{host}:{port}/ for {mask_url(url)}, {shown}", highlight=False)
    if host not in ("127.0.0.1", "localhost", "::1"):
        err_console.print(f"warning: the dashboard has no login and listens on {host}; prefer a tunnel")
    _guard(lambda: serve(opened, store, host, port))


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
