"""Commands that make the local models a study can serve: tiny-model (random weights: boot, flags,
timing) and trained-model (a target and its drafters trained from local text: acceptance that means
something)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from nova_search.cli._common import app, console
from nova_search.errors import SpecError


@app.command("tiny-model")
def tiny_model(
    out_dir: Annotated[str, typer.Argument(metavar="DIR", help="Folder to write the model into.")],
) -> None:
    """Build the tiny local model (Llama shape, local tokenizer; serve with --load-format dummy)."""
    from nova_search.models.tiny import build_tiny_model

    path = build_tiny_model(out_dir)
    console.print(f"tiny model written to {path} (EAGLE-3 drafter in {path / 'eagle3'})")


@app.command("trained-model")
def trained_model(
    out_dir: Annotated[str, typer.Argument(metavar="DIR", help="Folder to write the pair into.")],
    engine_python: Annotated[
        str | None,
        typer.Option(
            "--engine-python", envvar="NOVA_ENGINE_PYTHON", help="An interpreter with vLLM (it has torch)."
        ),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seeds the weights and the batches.")] = 0,
    size: Annotated[
        str, typer.Option("--size", help="cpu: the CPU pair (5M target); gpu: the GPU pair (82M target).")
    ] = "cpu",
    packages: Annotated[
        str | None,
        typer.Option(
            "--corpus",
            help="gpu: a site folder whose packages' Python sources are the corpus (e.g. the vLLM bundle's).",
        ),
    ] = None,
) -> None:
    """Train the CPU pair from local text (about 8 minutes on 2 cores; progress on stderr): a target
    model, a draft model (DIR/draft), an EAGLE-3 head (DIR/eagle3) and a held-out workload
    (DIR/workload.jsonl). Kept when already built the same way. ``--size gpu --corpus SITE`` trains
    the GPU pair instead (about 5 minutes on one H200)."""
    from nova_search.models.trained.build import TrainPlan, build_trained_pair, gpu_plan, summary_lines

    if not engine_python:
        raise SpecError("--engine-python: give an interpreter with vLLM and torch, or set NOVA_ENGINE_PYTHON")
    if size not in ("cpu", "gpu"):
        raise SpecError(f"--size: {size!r} is not a size; use cpu or gpu")
    if size == "gpu" and not packages:
        raise SpecError("--corpus: the gpu size trains on a site folder's sources; name one (e.g. /tmp/site)")
    plan = gpu_plan(seed) if size == "gpu" else TrainPlan(seed=seed)
    corpus_dir = Path(packages) if packages else None
    report = build_trained_pair(out_dir, engine_python, plan, corpus_dir)
    for line in summary_lines(report, Path(out_dir)):
        console.print(line)
