"""The trained pair served on the real engine (CPU), for its acceptance benchmark
(benchmarks/trained_acceptance.py) and its test: the study spec's engine with nova's own launcher, and
vLLM's own speculative-decoding counters."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from nova_search.engine.command import build_launch, new_api_key, served_name
from nova_search.engine.probe import parse_metrics
from nova_search.engine.server import Server, free_port
from nova_search.knobs import EngineConfig, SpeculativeConfig
from nova_search.loadgen.client import Target
from nova_search.loadgen.prompts import Prompt
from nova_search.loadgen.reference import collect_outputs
from nova_search.measure.records import ReferenceOutputs
from nova_search.spec import StudySpec, load_spec
from nova_search.testing import REPO

STUDY = REPO / "studies" / "experiments" / "trained-cpu-speculative.yaml"


def pair_spec(pair: Path, engine_python: str) -> StudySpec:
    """The shipped study spec, pointed at a pair built elsewhere."""
    return load_spec(
        STUDY,
        [
            f"model.path={pair}",
            f"engine.python={engine_python}",
            f"workload.path={pair / 'workload.jsonl'}",
            f"space.speculative.drafters.draft_model={pair / 'draft'}",
            f"space.speculative.drafters.eagle3={pair / 'eagle3'}",
        ],
    )


@contextmanager
def serve(
    spec: StudySpec, log: Path, speculative: SpeculativeConfig | None = None, extra: tuple[str, ...] = ()
) -> Iterator[Server]:
    """The target alone, or with a drafter, or with extra engine flags; stopped on exit."""
    engine = spec.engine.model_copy(update={"extra_args": [*spec.engine.extra_args, *extra]})
    config = EngineConfig(
        max_model_len=1024, gpu_memory_utilization=0.2, max_num_seqs=8, speculative=speculative
    )
    plan = build_launch(engine, spec.model, config, port=free_port(), api_key=new_api_key())
    with Server(plan, log, boot_timeout_s=300) as server:
        yield server


def acceptance(server: Server) -> dict:
    """vLLM's counters since the server started: drafted and accepted tokens, their ratio, and the
    acceptance at each draft position (accepted at that position / drafts)."""
    r = httpx.get(f"{server.base_url}/metrics", headers={"Authorization": f"Bearer {server.api_key}"})
    r.raise_for_status()
    sample = parse_metrics(r.text)
    drafts = sample.values.get("vllm:spec_decode_num_drafts_total", 0.0)
    drafted = sample.values.get("vllm:spec_decode_num_draft_tokens_total", 0.0)
    accepted = sample.values.get("vllm:spec_decode_num_accepted_tokens_total", 0.0)
    return {
        "drafts": drafts,
        "draft_tokens": drafted,
        "accepted_tokens": accepted,
        "acceptance": accepted / drafted if drafted else None,
        "mean_accepted_per_draft": accepted / drafts if drafts else None,
        "per_position": {str(p): round(v / drafts, 4) for p, v in sorted(sample.accepted_per_pos.items())}
        if drafts
        else {},
    }


def greedy(
    spec: StudySpec,
    log: Path,
    prompts: tuple[Prompt, ...],
    speculative: SpeculativeConfig | None = None,
    extra: tuple[str, ...] = (),
) -> tuple[ReferenceOutputs, dict]:
    """One server (``serve``): its greedy outputs for ``prompts`` and, read after them, vLLM's
    speculative-decoding counters (``acceptance``)."""
    with serve(spec, log, speculative, extra) as server:
        out = collect_outputs(Target(server.base_url, served_name(spec.model), server.api_key), prompts)
        return out, acceptance(server)
