"""Commands that read a study and act on it: status, best, policy, export, dump, report, notes,
dashboard. Each reads the study once (``results.load_results``) and asks ``results.select`` for the
tuned baseline, the best trials and the policy, so every command gives the same answer. Every JSON
output is a model with ``schema_version`` (``results.schemas``), asked for with ``--format json``; a
command that finds no answer (``best``, ``export``) raises ``NothingQualifies`` (exit 4)."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.markup import escape

from nova_search.cli._common import (
    StorageOpt,
    StudyArg,
    app,
    bounded_number,
    choice,
    console,
    emit,
    err_console,
    storage_url,
)
from nova_search.errors import NothingQualifies, NovaError, SpecError

BEST_FORMATS = ("json", "argv", "yaml")
POLICY_FORMATS = ("table", "json", "yaml")
DUMP_FORMATS = ("json", "csv")
STATUS_FORMATS = ("text", "json")


def _load(study: str, storage: str | None) -> Any:
    from nova_search.results.load import load_results

    return load_results(study, storage_url(storage, None))


def _conditions(where: list[str] | None) -> list[Any]:
    from nova_search.measure.objectives import parse_condition

    out = []
    for text in where or []:
        try:
            out.append(parse_condition(text))
        except SpecError as e:
            raise SpecError(f"--where: {e}") from None
    return out


def _objective(text: str, results: Any) -> Any:
    from nova_search.measure.objectives import parse_objective

    try:
        return parse_objective(text, results.objectives if results is not None else ())
    except SpecError as e:
        valid = ", ".join(o.name for o in results.objectives) if results is not None else ""
        hint = f" (this study's objectives: {valid})" if valid else ""
        raise SpecError(f"--objective: {e}{hint}") from None


@app.command("policy")
def policy_cmd(
    study: StudyArg,
    storage: StorageOpt = None,
    fmt: Annotated[str, typer.Option("--format", help="table, json or yaml.")] = "table",
    write: Annotated[
        bool,
        typer.Option(
            "--write",
            help="Also store the deploy answer in the study (attribute nova:deploy, for scripts); workers "
            "write it when a stage ends.",
        ),
    ] = False,
) -> None:
    """What to deploy (the deploy answer: concurrency ranges, each range's configuration, command and
    evidence, the export command), then the speculative verdict per drafter and concurrency behind it
    (speculation only where it is verified better)."""
    import json

    import yaml
    from rich.table import Table

    from nova_search.report.policy import (
        DRAFTER_HEADERS,
        POLICY_HEADERS,
        TRADEOFF_HEADERS,
        answer_lines,
        drafter_rows,
        header_lines,
        policy_rows,
        tradeoff_rows,
    )
    from nova_search.results.deploy import deploy_answer
    from nova_search.results.serialize import dumps_json, policy_dict
    from nova_search.results.speculation import verdict_of

    choice("--format", fmt, POLICY_FORMATS)
    results = _load(study, storage)
    verdict = verdict_of(results)
    answer = deploy_answer(results, verdict)
    if write:
        _write_answer(study, storage)
    if fmt != "table":
        # the deploy answer (schema_version), then the verdict's details it rests on (drafters, policy)
        text = dumps_json(policy_dict(answer, verdict))
        emit(text if fmt == "json" else yaml.safe_dump(json.loads(text), sort_keys=False, width=1000))
        return

    from nova_search.redact import terminal_safe  # stored text (argv, names) never steers the terminal

    def table(title: str, headers: list[str], rows: list[list[str]]) -> Table:
        t = Table(title=title, title_justify="left")
        for h in headers:
            t.add_column(h, overflow="fold")
        for r in rows:
            t.add_row(*(escape(terminal_safe(str(c))) for c in r))
        return t

    for line in answer_lines(answer):
        console.print(terminal_safe(line), markup=False, highlight=False, soft_wrap=True)
    console.print("")
    for line in header_lines(verdict):
        console.print(terminal_safe(line), markup=False)
    if verdict.drafters:
        console.print(table("Drafters", DRAFTER_HEADERS, drafter_rows(verdict)))
    for d in verdict.drafters:
        if d.tradeoffs:
            console.print(table(f"Latency tradeoffs: {d.method}", TRADEOFF_HEADERS, tradeoff_rows(d)))
    # the ranges as the verdict built them, with their gains (their commands are in the answer above)
    rows = [r[:-1] for r in policy_rows(verdict)]
    console.print(table("Deployment policy", POLICY_HEADERS[:-1], rows))
    if verdict.schedule:
        console.print(
            f"dynamic schedule: {json.dumps([list(x) for x in verdict.schedule])} ({verdict.schedule_note})"
        )
    for note in verdict.notes:
        console.print(f"[yellow]{escape(note)}[/]")


def _write_answer(study: str, storage: str | None) -> None:
    """The deploy answer stored in the study (``results.deploy.write_answer``)."""
    from nova_search.db import mask, open_storage, storage_errors
    from nova_search.results.deploy import write_answer

    url = storage_url(storage, None)
    db = open_storage(url, read_only=True)
    try:
        with storage_errors(url, f"write the deploy answer of {study!r} in"):
            write_answer(db, url, study)
    finally:
        db.engine.dispose()
    err_console.print(f"stored the deploy answer of {study} (nova:deploy) in {mask(url)}", highlight=False)


@app.command("best")
def best_cmd(
    study: StudyArg,
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
            "--where", help="Keep trials where metric OP value[@level] holds, e.g. 'ttft_p99_ms<=500@32'."
        ),
    ] = None,
    fmt: Annotated[
        str, typer.Option("--format", help="json, argv (the top trial's command) or yaml.")
    ] = "json",
) -> None:
    """The best feasible COMPLETE trials: the Pareto front, or the single best by --objective (JSON:
    `{schema_version, study, objective, where, trials}`). No trial qualifies (none feasible, none meets
    --where): exit 4. What to deploy is the policy's answer: `nova-search export STUDY`."""
    import shlex

    import yaml

    from nova_search.results.select import best_trials, tuned_baseline
    from nova_search.results.serialize import best_output, dumps_json

    choice("--format", fmt, BEST_FORMATS)
    conditions = _conditions(where)
    if objective is not None:
        _objective(objective, None)  # a bad name fails before storage is touched
    results = _load(study, storage)
    chosen = _objective(objective, results) if objective is not None else None
    found = best_trials(results, objective=chosen, where=conditions)
    if not found:
        extra = f" with {' and '.join(str(c) for c in conditions)}" if conditions else ""
        raise NothingQualifies(f"no feasible COMPLETE trial in study {study!r}{extra}")
    bound = [t for t in found if t.client_bound_levels]
    from nova_search.spec import level_name

    for t in bound:
        err_console.print(
            f"[yellow]warning:[/] trial {t.key} was client-bound at "
            f"{', '.join(level_name(c, results.replays_trace) for c in t.client_bound_levels)}: the load "
            "generator may have set those figures"
        )
    tuned = tuned_baseline(results)
    if tuned is not None and found[0].key != tuned.key:
        # the top of a ranking is not what to deploy: say where that answer is (stderr, not the data)
        err_console.print(
            f"note: this ranks trials; what to deploy is the policy's answer (tuned baseline: trial "
            f"{tuned.key}): nova-search policy {study} / nova-search export {study}"
        )
    if fmt == "argv":  # the deployable vllm serve command, as the worker stored it (nova:deploy_argv)
        from nova_search.results.launch import serve_argv

        emit(shlex.join(serve_argv(found[0].argv)))
        return
    payload = best_output(
        results, found, chosen.name if chosen is not None else None, list(where or [])
    ).model_dump(mode="json")
    emit(dumps_json(payload) if fmt == "json" else yaml.safe_dump(payload, sort_keys=False))


@app.command("dump")
def dump_cmd(
    study: StudyArg,
    storage: StorageOpt = None,
    output: Annotated[
        str | None, typer.Option("-o", "--output", help="Write here instead of stdout.")
    ] = None,
    fmt: Annotated[
        str, typer.Option("--format", help="json (the whole study) or csv (one row per trial and level).")
    ] = "json",
) -> None:
    """The whole study as JSON (with schema_version), or as CSV: every trial's params, values,
    per-level profile, timing, engine version and device."""
    from nova_search.files import write_atomic
    from nova_search.results.serialize import dumps_json, study_dict, to_csv

    choice("--format", fmt, DUMP_FORMATS)
    results = _load(study, storage)
    text = dumps_json(study_dict(results)) + "\n" if fmt == "json" else to_csv(results)
    if output is None:
        emit(text)
        return
    write_atomic(output, text)
    err_console.print(f"wrote {output}")


@app.command("export")
def export_cmd(
    study: StudyArg,
    storage: StorageOpt = None,
    trial: Annotated[
        str | None,
        typer.Option(
            "--trial", help="A trial's key (3, speculative#2). Default: what the policy recommends."
        ),
    ] = None,
    fmt: Annotated[str, typer.Option("--format", help="vllm (a command line), compose or k8s.")] = "vllm",
    model: Annotated[
        str | None,
        typer.Option("--model", help="The real model's path or hub id (replaces the study's model path)."),
    ] = None,
    concurrency: Annotated[
        int | None,
        typer.Option("--concurrency", help="The load you serve, when the policy switches by load."),
    ] = None,
    as_measured: Annotated[
        bool, typer.Option("--as-measured", help="Export the flags exactly as measured (dummy weights too).")
    ] = False,
    keep_synthetic: Annotated[
        bool,
        typer.Option(
            "--keep-synthetic-acceptance",
            help="Keep a synthetic acceptance profile in --speculative-config (by default it is dropped: "
            "its figures are projections, not a deployment).",
        ),
    ] = False,
    name: Annotated[str, typer.Option("--name", help="Service / Deployment name (compose, k8s).")] = "vllm",
    image: Annotated[
        str | None,
        typer.Option(
            "--image",
            help="Container image, a vLLM build for the device (default: vLLM's image for the device).",
        ),
    ] = None,
    device: Annotated[
        str | None,
        typer.Option(
            "--device",
            help="cuda or cpu: where it will run. Default: the device the study measured on; another "
            "is refused (a CPU study says nothing about a GPU).",
        ),
    ] = None,
) -> None:
    """Print what to deploy: by default the study's deployment policy (the same answer as `policy`),
    else one trial; as a vllm command, a compose service or Kubernetes manifests (a volume claim for
    the model, a Service and a Deployment; the header says which Secret to create first)."""
    from nova_search.results.export import export_study
    from nova_search.results.launch import DEVICES
    from nova_search.results.manifests import EXPORT_FORMATS

    choice("--format", fmt, EXPORT_FORMATS)
    if device is not None:
        choice("--device", device, DEVICES)
    from nova_search.spec.workload import MAX_CONCURRENCY

    bounded_number("--concurrency", concurrency, 1, MAX_CONCURRENCY)
    from nova_search.redact import control_character

    for flag, value in (("--model", model), ("--image", image)):
        c = control_character(value or "")
        if c is not None:  # both go into the command, the YAML and its header
            raise SpecError(f"{flag}: the value holds a control character ({c}); give it on one line")
    exported = export_study(
        _load(study, storage),
        fmt,
        trial=trial,
        concurrency=concurrency,
        model=model,
        as_measured=as_measured,
        keep_synthetic=keep_synthetic,
        device=device,
        name=name,
        image=image,
    )
    for note in exported.launch.notes:
        if "synthetic acceptance" in note:
            err_console.print(note, markup=False, highlight=False)
    emit(exported.text)


@app.command("status")
def status_cmd(
    study: StudyArg,
    storage: StorageOpt = None,
    fmt: Annotated[str, typer.Option("--format", help="text or json.")] = "text",
    as_json: Annotated[
        bool, typer.Option("--json", hidden=True, help="Same as --format json (kept for old scripts).")
    ] = False,
) -> None:
    """Trials by state, workers seen recently, the best so far per objective, the tuned baseline, ETA,
    then what to deploy so far."""
    from nova_search.report.policy import answer_lines
    from nova_search.report.status import status_lines
    from nova_search.results.deploy import deploy_answer
    from nova_search.results.serialize import dumps_json
    from nova_search.results.standing import status_output, study_status

    choice("--format", fmt, STATUS_FORMATS)
    results = _load(study, storage)
    st = study_status(results)
    answer = deploy_answer(results)  # status ends with what to deploy so far
    if as_json or fmt == "json":
        emit(dumps_json(status_output(st, answer).model_dump(mode="json")))
        return
    emit("\n".join(status_lines(st) + answer_lines(answer)))


@app.command("report")
def report_cmd(
    study: StudyArg,
    storage: StorageOpt = None,
    output: Annotated[str, typer.Option("-o", "--output", help="The HTML file to write.")] = "report.html",
    gpu_hour_usd: Annotated[
        float | None,
        typer.Option("--gpu-hour-usd", help="Price of one GPU-hour (> 0), for cost per 1M tokens."),
    ] = None,
) -> None:
    """Write a self-contained HTML report: stock vs tuned, latency, the verdict, Pareto, importances."""
    import math

    from nova_search.report.data import build_report_data
    from nova_search.report.html.render import write_report

    if gpu_hour_usd is not None and not (math.isfinite(gpu_hour_usd) and gpu_hour_usd > 0):
        raise SpecError(f"--gpu-hour-usd {gpu_hour_usd!r}: give a price above 0, e.g. 2.5")
    data = build_report_data(_load(study, storage), gpu_hour_usd=gpu_hour_usd)
    try:
        path = write_report(data, output)
    except OSError as e:
        raise NovaError(f"cannot write {output}: {e.strerror or e}") from None
    n = len(data.notes)
    summary = f"{len(data.trials)} trials, {n} note{'' if n == 1 else 's'} on what is missing or doubtful"
    console.print(f"report written to {path} ({summary})", highlight=False)


@app.command("notes")
def notes_cmd(study: StudyArg, storage: StorageOpt = None) -> None:
    """(Re)write the optuna-dashboard notes and graphs of an existing study: every trial's note, the
    study note (stock vs tuned, the best trials, the verdict and policy) and the graphs."""
    from nova_search.db import mask
    from nova_search.report.dashboard.publish import rewrite_notes

    url = storage_url(storage, None)
    n = rewrite_notes(study, url)
    console.print(f"wrote {n} trial notes, the study note and its graphs for {study} in {mask(url)}")


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
    from nova_search.db import mask
    from nova_search.report.dashboard.serve import open_dashboard, serve

    url = storage_url(storage, None)
    opened, store, folder = open_dashboard(url, artifacts_dir)
    shown = f"artifacts from {folder}" if folder else "no artifacts folder (--artifacts-dir)"
    console.print(f"optuna-dashboard on http://{host}:{port}/ for {mask(url)}, {shown}", highlight=False)
    if host not in ("127.0.0.1", "localhost", "::1"):
        err_console.print(f"warning: the dashboard has no login and listens on {host}; prefer a tunnel")
    serve(opened, store, host, port)
