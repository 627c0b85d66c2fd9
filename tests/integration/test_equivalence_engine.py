"""Output equivalence on the real engine: vLLM's CPU build, the tiny model, nova's own launcher.

The non-speculative base is the session's ``shared_vllm`` (the same config, booted once for every test
that reads from it). ngram, draft_model (the tiny model as its own drafter) and eagle3 (the locally
made random-weight drafter) are booted one after another with the base's knobs plus their
``--speculative-config``; each must reproduce the base's greedy tokens on the study's reference prompt
set within the default tolerance, and must really have speculated (drafts counted in /metrics).
Negative case: the same base server on another study's reference prompts is flagged.
"""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from nova_search.analysis.equivalence import TOLERANCE, compare_outputs
from nova_search.engine.command import build_launch
from nova_search.engine.config import EngineConfig, SpeculativeConfig
from nova_search.engine.probe import parse_metrics
from nova_search.engine.server import Server, free_port
from nova_search.loadgen.client import Target
from nova_search.loadgen.reference import REFERENCE_OUTPUT_LEN, collect_outputs, reference_prompts
from nova_search.spec import EngineSpec, ModelSpec, parse_spec
from tests.support.specs import tiny_spec

pytestmark = pytest.mark.slow


def _drafts(server: Server) -> float:
    r = httpx.get(f"{server.base_url}/metrics", headers={"Authorization": f"Bearer {server.api_key}"})
    r.raise_for_status()
    return parse_metrics(r.text).values.get("vllm:spec_decode_num_drafts_total", 0.0)


def test_speculative_configs_reproduce_the_base(
    shared_vllm: Server, engine_python: str, tiny_model: Path, tmp_path: Path
) -> None:
    spec = parse_spec(tiny_spec(tiny_model))
    prompts = reference_prompts(spec.workload, spec.model)
    base_target = Target(shared_vllm.base_url, "tiny", shared_vllm.api_key)
    base = collect_outputs(base_target, prompts)
    assert base.ok, base.errors
    assert all(len(ids) == REFERENCE_OUTPUT_LEN for ids in base.token_ids)

    # the same server twice: identical
    again = compare_outputs(base.token_ids, collect_outputs(base_target, prompts).token_ids)
    assert again.exact_matches == again.prompts == 8, again.describe()

    # negative: another study's reference prompts give other outputs, and the check says so
    other_prompts = reference_prompts(spec.workload.model_copy(update={"seed": 1}), spec.model)
    other = collect_outputs(base_target, other_prompts)
    assert other.ok, other.errors
    flagged = compare_outputs(base.token_ids, other.token_ids)
    assert not flagged.equivalent, flagged.describe()
    assert flagged.mean_prefix_fraction < 1 - 2 * TOLERANCE

    # the speculative configs, the base's knobs plus --speculative-config (as shared_vllm is launched)
    engine = EngineSpec(
        python=engine_python,
        device="cpu",
        cpus=[0],
        env={"VLLM_CPU_OMP_THREADS_BIND": "0"},
        extra_args=["--enforce-eager", "--load-format", "dummy"],
    )
    model = ModelSpec(path=str(tiny_model), served_name="tiny")
    speculative = {
        "ngram": SpeculativeConfig(
            method="ngram", num_speculative_tokens=4, prompt_lookup_min=2, prompt_lookup_max=4
        ),
        "draft_model": SpeculativeConfig(
            method="draft_model", model=str(tiny_model), num_speculative_tokens=3
        ),
        "eagle3": SpeculativeConfig(
            method="eagle3", model=str(tiny_model / "eagle3"), num_speculative_tokens=3
        ),
    }
    results = {}
    for name, spec_config in speculative.items():
        config = EngineConfig(
            max_model_len=2048, gpu_memory_utilization=0.15, max_num_seqs=16, speculative=spec_config
        )
        plan = build_launch(engine, model, config, port=free_port(), api_key=os.urandom(12).hex())
        assert "--speculative-config" in plan.argv
        with Server(plan, tmp_path / f"{name}.log", boot_timeout_s=300) as server:
            out = collect_outputs(Target(server.base_url, "tiny", server.api_key), prompts)
            drafts = _drafts(server)
        assert not server.alive()
        assert out.ok, (name, out.errors)
        assert drafts > 0, f"{name}: the engine drafted nothing, so nothing was verified"
        results[name] = compare_outputs(base.token_ids, out.token_ids)
    for name, eq in results.items():
        assert eq.equivalent, f"{name}: {eq.describe()}; first divergences {eq.first_divergence}"
        assert eq.tolerance == TOLERANCE
