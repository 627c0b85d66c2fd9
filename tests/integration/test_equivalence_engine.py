"""Output equivalence on the real engine: vLLM's CPU build, the tiny model, nova's own launcher.

The check on the session's ``shared_vllm`` (booted once for every test that reads from it): the same
server on the same reference prompts twice is identical, and the same server on another study's
reference prompts is flagged. The drafters themselves are checked where they are booted anyway, so no
test boots them only for this: ``test_trained_engine`` runs the draft model, n-gram and EAGLE-3 on the
trained pair (real structure, drafts counted in /metrics) and flags a deliberately broken target, and
``test_stages_engine`` checks that every speculative trial of a staged study kept the tuned trial's
greedy tokens.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nova_search.analysis.equivalence import TOLERANCE, compare_outputs
from nova_search.engine.server import Server
from nova_search.loadgen.client import Target
from nova_search.loadgen.reference import REFERENCE_OUTPUT_LEN, collect_outputs, reference_prompts
from nova_search.spec import parse_spec
from nova_search.testing.specs import tiny_spec

pytestmark = pytest.mark.engine


def test_the_check_passes_a_server_against_itself_and_flags_other_outputs(
    shared_vllm: Server, tiny_model: Path
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
    assert again.tolerance == flagged.tolerance == TOLERANCE
