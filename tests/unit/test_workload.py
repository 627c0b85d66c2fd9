"""Seeded synthetic prompts: exact lengths, ids clear of special tokens, reproducible."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from nova_search.errors import SpecError
from nova_search.loadgen.prompts import level_seed, synthetic, vocab_size
from nova_search.spec import LenRange, ModelSpec, WorkloadSpec


def take(n: int, workload: WorkloadSpec, vocab: int = 1000, seed: int = 0) -> list:
    return list(itertools.islice(synthetic(workload, vocab, seed), n))


def test_fixed_lengths_are_exact() -> None:
    prompts = take(20, WorkloadSpec(input_len=96, output_len=48))
    assert all(len(p.token_ids) == 96 for p in prompts)
    assert all(p.output_len == 48 for p in prompts)


def test_ranged_lengths_stay_in_range_and_vary() -> None:
    w = WorkloadSpec(input_len=LenRange(low=10, high=20), output_len=LenRange(low=1, high=4))
    prompts = take(200, w)
    ins = {len(p.token_ids) for p in prompts}
    outs = {p.output_len for p in prompts}
    assert ins <= set(range(10, 21)) and len(ins) > 5
    assert outs == {1, 2, 3, 4}  # high is inclusive


def test_token_ids_avoid_special_tokens() -> None:
    prompts = take(50, WorkloadSpec(input_len=200), vocab=1000)
    ids = [t for p in prompts for t in p.token_ids]
    assert min(ids) >= 3
    assert max(ids) < 990  # below 0.99 * vocab
    assert all(isinstance(t, int) for t in ids)


def test_same_seed_same_prompts_other_seed_other_prompts() -> None:
    w = WorkloadSpec(input_len=32)
    assert take(5, w, seed=7) == take(5, w, seed=7)
    assert take(5, w, seed=7) != take(5, w, seed=8)


def test_level_seeds_differ_by_level_repeat_and_phase() -> None:
    seeds = {
        level_seed(0, level, repeat, warmup)
        for level in range(4)
        for repeat in range(3)
        for warmup in (False, True)
    }
    assert len(seeds) == 4 * 3 * 2
    assert level_seed(1, 0) != level_seed(0, 0)
    assert level_seed(5, 2, 1, True) == level_seed(5, 2, 1, True)


def test_vocab_size_given() -> None:
    assert vocab_size(ModelSpec(path="/nonexistent", vocab_size=32000)) == 32000


def test_vocab_size_from_config(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"vocab_size": 5000}))
    assert vocab_size(ModelSpec(path=str(tmp_path))) == 5000


def test_vocab_size_from_nested_text_config(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"text_config": {"vocab_size": 262144}}))
    assert vocab_size(ModelSpec(path=str(tmp_path))) == 262144


def test_vocab_size_missing_config(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="model.vocab_size"):
        vocab_size(ModelSpec(path=str(tmp_path / "nope")))


def test_vocab_size_config_without_it(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 64}))
    with pytest.raises(SpecError, match="no integer vocab_size"):
        vocab_size(ModelSpec(path=str(tmp_path)))
