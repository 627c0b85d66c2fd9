"""Speculation on the trained pair (``nova_search.trained``), on the real engine: vLLM's CPU build,
real weights, held-out text from the study's own workload, nova's own launcher.

- The distilled draft model is accepted for more than 0.3 of its drafted tokens, as vLLM counts them
  (``/metrics``); n-gram is measured beside it.
- The output-equivalence check on real structure: every drafter reproduces the target's greedy tokens,
  and a deliberately broken configuration (the target without its last layer, ``--hf-overrides``) is
  flagged.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from nova_search.analysis.equivalence import compare_outputs
from nova_search.engine.command import build_launch, new_api_key
from nova_search.engine.config import EngineConfig, SpeculativeConfig
from nova_search.engine.probe import parse_metrics
from nova_search.engine.server import Server, free_port
from nova_search.loadgen.client import Target
from nova_search.loadgen.reference import collect_outputs, reference_prompts
from nova_search.spec import load_spec
from tests.support import REPO

pytestmark = pytest.mark.slow


def acceptance(server: Server) -> float:
    r = httpx.get(f"{server.base_url}/metrics", headers={"Authorization": f"Bearer {server.api_key}"})
    r.raise_for_status()
    values = parse_metrics(r.text).values
    drafted = values.get("vllm:spec_decode_num_draft_tokens_total", 0.0)
    assert drafted > 0, "the engine drafted nothing"
    return values["vllm:spec_decode_num_accepted_tokens_total"] / drafted


def test_the_trained_drafter_is_accepted_and_every_drafter_keeps_the_targets_output(
    trained_pair: Path, engine_python: str, tmp_path: Path
) -> None:
    report = json.loads((trained_pair / "report.json").read_text())
    assert report["target"]["held_out_loss"] < 4.0  # it learned the text (a uniform guess is ln 4096 = 8.3)
    spec = load_spec(
        REPO / "studies" / "trained-cpu-speculative.yaml",
        [
            f"model.path={trained_pair}",
            f"engine.python={engine_python}",
            f"workload.path={trained_pair / 'workload.jsonl'}",
        ],
    )
    prompts = reference_prompts(spec.workload, spec.model, n=8, output_len=48)
    assert all(len(p.token_ids) > 32 for p in prompts)  # held-out text, not a stub

    def run(name: str, speculative: SpeculativeConfig | None = None, extra: tuple[str, ...] = ()):
        engine = spec.engine.model_copy(update={"extra_args": [*spec.engine.extra_args, *extra]})
        config = EngineConfig(
            max_model_len=1024, gpu_memory_utilization=0.2, max_num_seqs=8, speculative=speculative
        )
        plan = build_launch(engine, spec.model, config, port=free_port(), api_key=new_api_key())
        with Server(plan, tmp_path / f"{name}.log", boot_timeout_s=300) as server:
            out = collect_outputs(Target(server.base_url, "trained", server.api_key), prompts)
            rate = acceptance(server) if speculative else None
        assert out.ok, (name, out.errors)
        return out.token_ids, rate

    base, _ = run("base")
    drafted, draft_rate = run(
        "draft_model",
        SpeculativeConfig(method="draft_model", model=str(trained_pair / "draft"), num_speculative_tokens=3),
    )
    ngram, ngram_rate = run(
        "ngram",
        SpeculativeConfig(method="ngram", num_speculative_tokens=3, prompt_lookup_min=2, prompt_lookup_max=4),
    )
    broken, _ = run("broken", extra=("--hf-overrides", json.dumps({"num_hidden_layers": 3})))

    assert draft_rate is not None and draft_rate > 0.3, f"draft_model acceptance {draft_rate:.3f}"
    assert ngram_rate is not None and 0 <= ngram_rate <= 1
    for name, ids in (("draft_model", drafted), ("ngram", ngram)):
        eq = compare_outputs(base, ids)
        assert eq.equivalent, f"{name}: {eq.describe()}"
    flagged = compare_outputs(base, broken)
    assert not flagged.equivalent, flagged.describe()
    print(f"acceptance: draft_model k=3 {draft_rate:.3f}, ngram k=3 {ngram_rate:.3f}")
