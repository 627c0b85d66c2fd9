"""Commands that check, and store nothing: ``bench`` measures a running server with nova's load
generator (a deployment, or vLLM's own benchmark's server for the cross-check), ``validate`` reads a
spec and prints it as a study would store it.

``bench`` is thin: its options go to one model (``trial.bench_options.BenchOptions``), which holds
their bounds and rules and names the option of any problem (exit 2); its plan is measured by
``trial.bench.run_bench``.
"""

from __future__ import annotations

from typing import Annotated

import typer

from nova_search.cli._common import SetOpt, app, console, parse_ints
from nova_search.spec import load_spec


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
    warmup: Annotated[
        int,
        typer.Option(
            "--warmup", min=0, help="Warmup requests per level (one round: at most the concurrency)."
        ),
    ] = 4,
    vocab_size: Annotated[
        int, typer.Option("--vocab-size", min=11, help="Prompt token ids are drawn below this.")
    ] = 1000,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    prompt_format: Annotated[
        str,
        typer.Option(
            "--prompt-format",
            help="ids (random token ids) or text (random text of the same token length, tokenized by the "
            "server, as vllm bench serve's random dataset; needs --tokenizer).",
        ),
    ] = "ids",
    tokenizer: Annotated[
        str | None, typer.Option("--tokenizer", help="A folder with tokenizer.json (--prompt-format text).")
    ] = None,
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
    requests_out: Annotated[
        str | None,
        typer.Option(
            "--requests-out",
            help="Also write every measured request to this JSONL file (level, send_s, ttft_ms, e2e_ms, "
            "tokens, success), replacing it.",
        ),
    ] = None,
    out_format: Annotated[
        str,
        typer.Option("--format", help="table, or json: {schema_version, url, names, levels} (docs/json.md)."),
    ] = "table",
    as_json: Annotated[
        bool, typer.Option("--json", hidden=True, help="Same as --format json (kept for old scripts).")
    ] = False,
    json_names: Annotated[
        str,
        typer.Option(
            "--json-names",
            help="Keys of each JSON level: nova (LevelResult fields) or vllm (vllm bench serve "
            "--save-result keys).",
        ),
    ] = "nova",
) -> None:
    """Measure an already-running server with nova's load generator and print the profile per level."""
    from nova_search.trial.bench import run_bench, vllm_names
    from nova_search.trial.bench_options import bench_options

    options = bench_options(
        url=url,
        concurrency=parse_ints(concurrency, "--concurrency", "1,8,32", required=True),
        num_requests=num_requests,
        duration=duration,
        warmup=warmup,
        input_len=input_len,
        output_len=output_len,
        api_key=api_key,
        model=model,
        vocab_size=vocab_size,
        seed=seed,
        cpus=cpus,
        processes=processes,
        usage=usage,
        json_names=json_names,
        out_format="json" if as_json else out_format,
        prompt_format=prompt_format,
        tokenizer=tokenizer,
        preconnect=preconnect,
        requests_out=requests_out or None,
    )
    results = run_bench(options.plan())
    if options.out_format == "json":
        from nova_search.results.schemas import BenchOutput
        from nova_search.results.serialize import dumps_json

        names = options.json_names
        rows = [vllm_names(r) if names == "vllm" else r.as_dict() for r in results]
        print(dumps_json(BenchOutput(url=url, names=names, levels=rows).model_dump(mode="json")))
        return
    from nova_search.report.progress import profile_table

    console.print(profile_table(results, title=f"nova-search bench {url}"))
    for r in results:
        if r.client_note:
            console.print(f"concurrency {r.concurrency}: {r.client_note}", highlight=False)


@app.command()
def validate(
    spec_path: Annotated[str, typer.Argument(metavar="SPEC.yaml")],
    set_: SetOpt = None,
) -> None:
    """Validate a spec (with overrides) and print it as the study will store it. A trace workload's
    trace is read and checked too."""
    import yaml

    from nova_search.spec import redacted_spec

    spec = load_spec(spec_path, list(set_ or []))
    if spec.workload.kind == "trace":
        from nova_search.loadgen.replay import read_checked

        read_checked(spec.workload, spec.sweep)
    console.print(yaml.safe_dump(redacted_spec(spec), sort_keys=False), highlight=False)
