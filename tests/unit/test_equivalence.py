"""Output equivalence: the pure comparison, the reference prompt set, and the response parsing."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from nova_search.analysis.equivalence import TOLERANCE, compare_outputs, first_divergence
from nova_search.engine.server import free_port
from nova_search.loadgen.client import Target
from nova_search.loadgen.prompts import level_seed, prompt_source
from nova_search.loadgen.reference import (
    REFERENCE_OUTPUT_LEN,
    REFERENCE_PROMPTS,
    collect_outputs,
    greedy_payload,
    parse_token_ids,
    reference_prompts,
)
from nova_search.spec import ModelSpec, WorkloadSpec

BASE = [tuple(range(i, i + 32)) for i in range(8)]

# ---------------------------------------------------------------- compare_outputs


def test_identical_outputs_are_equivalent() -> None:
    eq = compare_outputs(BASE, [list(b) for b in BASE])
    assert eq.equivalent and eq.prompts == 8 and eq.exact_matches == 8 and eq.diverged == 0
    assert eq.mean_prefix_fraction == 1.0
    assert eq.first_divergence == (None,) * 8 and eq.prefix_fractions == (1.0,) * 8
    assert eq.tolerance == TOLERANCE == 0.125


def test_first_divergence_positions_and_prefix_fractions() -> None:
    cand = list(BASE)
    cand[2] = BASE[2][:8] + (9999,) + BASE[2][9:]  # diverges at 8 of 32
    cand[5] = BASE[5][:24]  # ends early at 24
    eq = compare_outputs(BASE, cand)
    assert eq.first_divergence == (None, None, 8, None, None, 24, None, None)
    assert eq.prefix_fractions[2] == 0.25 and eq.prefix_fractions[5] == 0.75
    assert eq.exact_matches == 6
    assert eq.mean_prefix_fraction == pytest.approx((6 + 0.25 + 0.75) / 8)
    assert eq.equivalent  # 1 - 0.875 = 0.125 of the tokens lost: exactly at the tolerance


def test_one_flip_at_the_first_token_is_the_default_tolerance() -> None:
    one = list(BASE)
    one[0] = (7777,) + BASE[0][1:]
    assert compare_outputs(BASE, one).equivalent
    two = list(one)
    two[1] = (7777,) + BASE[1][1:]
    eq = compare_outputs(BASE, two)
    assert not eq.equivalent and eq.mean_prefix_fraction == pytest.approx(0.75)
    assert "NOT equivalent" in eq.describe() and "6/8" in eq.describe()
    assert compare_outputs(BASE, two, tolerance=0.25).equivalent
    assert not compare_outputs(BASE, one, tolerance=0.0).equivalent


def test_a_different_model_is_flagged() -> None:
    other = [tuple(reversed(b)) for b in BASE]
    eq = compare_outputs(BASE, other)
    assert not eq.equivalent and eq.exact_matches == 0 and eq.mean_prefix_fraction == 0.0
    assert eq.as_dict()["first_divergence"] == [0] * 8


def test_a_failed_request_diverges_at_zero() -> None:
    cand = list(BASE)
    cand[3] = ()
    eq = compare_outputs(BASE, cand)
    assert eq.first_divergence[3] == 0 and eq.prefix_fractions[3] == 0.0
    assert eq.equivalent  # one lost prompt of 8 is within 0.125
    cand[4] = ()
    assert not compare_outputs(BASE, cand).equivalent


def test_longer_candidate_diverges_where_the_base_ends() -> None:
    assert first_divergence([1, 2, 3], [1, 2, 3, 4]) == 3
    assert first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert first_divergence([1, 2, 3], [0, 2, 3]) == 0


@pytest.mark.parametrize(
    ("base", "cand", "tol", "needle"),
    [
        (BASE, BASE[:7], TOLERANCE, "8 base outputs but 7"),
        ([], [], TOLERANCE, "no outputs"),
        ([(1,), ()], [(1,), (2,)], TOLERANCE, "base output is empty"),
        (BASE, BASE, 1.5, "tolerance"),
        (BASE, BASE, -0.1, "tolerance"),
    ],
)
def test_bad_inputs_raise(base: list, cand: list, tol: float, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        compare_outputs(base, cand, tolerance=tol)


# ---------------------------------------------------------------- reference prompts

MODEL = ModelSpec(path="/nonexistent", vocab_size=2048)


def test_reference_prompts_are_fixed_per_study_and_apart_from_the_sweep() -> None:
    w = WorkloadSpec(input_len=64, output_len=200, seed=3)
    ref = reference_prompts(w, MODEL)
    assert ref == reference_prompts(w, MODEL)  # every trial of a study gets the same set
    assert len(ref) == REFERENCE_PROMPTS == 8
    assert all(len(p.token_ids) == 64 and p.output_len == REFERENCE_OUTPUT_LEN == 32 for p in ref)
    assert all(3 <= t < 2048 for p in ref for t in p.token_ids)
    source = prompt_source(w, MODEL)
    swept = {
        p.token_ids
        for i, r, warm in itertools.product(range(4), range(3), (False, True))
        for p in itertools.islice(source.prompts(level_seed(w.seed, i, r, warm)), 16)
    }
    assert not swept & {p.token_ids for p in ref}
    other = reference_prompts(WorkloadSpec(input_len=64, output_len=200, seed=4), MODEL)
    assert {p.token_ids for p in other}.isdisjoint({p.token_ids for p in ref})
    assert len(reference_prompts(w, MODEL, n=3, output_len=5)) == 3
    with pytest.raises(ValueError):
        reference_prompts(w, MODEL, n=0)


def test_reference_prompts_of_a_chat_workload_go_as_token_ids(tmp_path: Path) -> None:
    from nova_search.models.tiny import build_tiny_model

    tiny = build_tiny_model(tmp_path / "tiny", eagle3=False)
    w = WorkloadSpec(input_len=24, output_len=10, endpoint="chat")
    ref = reference_prompts(w, ModelSpec(path=str(tiny)))
    assert all(p.messages == () and p.endpoint == "completions" and len(p.token_ids) == 24 for p in ref)


# ---------------------------------------------------------------- payload and parsing


def test_greedy_payload_is_greedy_exact_and_asks_for_ids() -> None:
    p = reference_prompts(WorkloadSpec(input_len=8), MODEL)[0]
    body = greedy_payload(Target("http://x", "m", "k"), p)
    assert body["temperature"] == 0.0 and body["ignore_eos"] is True
    assert body["max_tokens"] == body["min_tokens"] == 32 and body["prompt"] == list(p.token_ids)
    assert body["return_token_ids"] is True and body["return_tokens_as_token_ids"] is True
    assert "stream" not in body


def test_parse_token_ids_prefers_token_ids_then_logprobs() -> None:
    assert parse_token_ids({"choices": [{"token_ids": [5, 6], "logprobs": None}]}) == (5, 6)
    body = {"choices": [{"token_ids": None, "logprobs": {"tokens": ["token_id:7", "token_id:8"]}}]}
    assert parse_token_ids(body) == (7, 8)
    with pytest.raises(ValueError, match="neither"):
        parse_token_ids({"choices": [{"text": "hi", "logprobs": {"tokens": ["hi"]}}]})
    with pytest.raises(ValueError, match="no choices"):
        parse_token_ids({"error": "x"})


def test_collect_outputs_never_raises_for_a_request() -> None:
    prompts = reference_prompts(WorkloadSpec(input_len=8), MODEL, n=2)
    out = collect_outputs(Target(f"http://127.0.0.1:{free_port()}", "m", "k"), prompts, timeout_s=5)
    assert out.token_ids == ((), ()) and not out.ok
    assert all(e.startswith("ConnectError") for e in out.errors)


def test_outputs_round_trip_through_json() -> None:
    import json

    from nova_search.measure.records import ReferenceOutputs
    from nova_search.schema import decode_reference as outputs_from_dict
    from nova_search.schema import encode_reference as outputs_as_dict

    out = ReferenceOutputs(token_ids=((1, 2, 3), ()), errors=("", "HTTP 500: boom"))
    assert outputs_from_dict(json.loads(json.dumps(outputs_as_dict(out)))) == out
    assert outputs_from_dict({"token_ids": [[4]]}) == ReferenceOutputs(((4,),), ("",))
    with pytest.raises(ValueError, match="errors"):
        outputs_from_dict({"token_ids": [[4]], "errors": ["", ""]})
