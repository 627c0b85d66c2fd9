"""Speculation on the trained pair (``nova_search.models.trained``), on the real engine: vLLM's CPU build,
real weights, held-out text from the study's own workload, nova's own launcher.

- The distilled draft model is accepted for more than 0.3 of its drafted tokens, and the EAGLE-3 head
  for more than 0.3 of its first drafted tokens, as vLLM counts them (``/metrics``); n-gram is
  measured beside them.
- The output-equivalence check on real structure: every drafter reproduces the target's greedy tokens,
  and a deliberately broken configuration (the target with a wrong ``rms_norm_eps``, through
  ``--hf-overrides``) is flagged.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nova_search.analysis.equivalence import compare_outputs
from nova_search.knobs import SpeculativeConfig
from nova_search.loadgen.reference import reference_prompts
from nova_search.testing.pair import greedy, pair_spec

pytestmark = pytest.mark.engine


def test_the_trained_drafter_is_accepted_and_every_drafter_keeps_the_targets_output(
    trained_pair: Path, engine_python: str, tmp_path: Path
) -> None:
    report = json.loads((trained_pair / "report.json").read_text())
    assert report["target"]["held_out_loss"] < 5.0  # it learned the text (a uniform guess is ln 4096 = 8.3)
    spec = pair_spec(trained_pair, engine_python)
    prompts = reference_prompts(spec.workload, spec.model, n=8, output_len=48)
    assert all(len(p.token_ids) > 32 for p in prompts)  # held-out text, not a stub

    def run(name: str, speculative: SpeculativeConfig | None = None, extra: tuple[str, ...] = ()):
        out, counts = greedy(spec, tmp_path / f"{name}.log", prompts, speculative, extra)
        assert out.ok, (name, out.errors)
        return out.token_ids, counts

    base, _ = run("base")
    draft = SpeculativeConfig(
        method="draft_model", model=str(trained_pair / "draft"), num_speculative_tokens=3
    )
    drafted, by_draft = run("draft_model", draft)
    ngram = SpeculativeConfig(
        method="ngram", num_speculative_tokens=3, prompt_lookup_min=2, prompt_lookup_max=4
    )
    looked_up, by_ngram = run("ngram", ngram)
    eagle = SpeculativeConfig(method="eagle3", model=str(trained_pair / "eagle3"), num_speculative_tokens=3)
    headed, by_eagle = run("eagle3", eagle)
    # a mangled config.json: vLLM loads it, serves, and says nothing
    broken, _ = run("broken", extra=("--hf-overrides", json.dumps({"rms_norm_eps": 1.0})))

    assert all(c["draft_tokens"] > 0 for c in (by_draft, by_ngram, by_eagle)), "the engine drafted nothing"
    assert by_draft["acceptance"] > 0.3, by_draft
    # the head learned the target's features: vLLM accepts its first drafted token (0.70 with the pair
    # of benchmarks/results/trained-cpu, 0.49 with one built on an AVX2-only host). Its later positions
    # depend on the host that built the pair (k=3 overall: 0.44 and 0.26), so only position 0 is held
    assert by_eagle["per_position"]["0"] > 0.3, by_eagle
    for name, ids in (("draft_model", drafted), ("ngram", looked_up), ("eagle3", headed)):
        eq = compare_outputs(base, ids)
        assert eq.equivalent, f"{name}: {eq.describe()}"
    flagged = compare_outputs(base, broken)
    assert not flagged.equivalent, flagged.describe()
    rates = {
        n: round(c["acceptance"], 3)
        for n, c in (("draft_model", by_draft), ("eagle3", by_eagle), ("ngram", by_ngram))
    }
    print(f"acceptance at k=3: {rates}")
