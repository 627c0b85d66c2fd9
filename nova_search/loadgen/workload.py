"""Seeded synthetic prompts. Prompts are token-id lists sent to /v1/completions, so their length in
tokens is exact without a tokenizer; ``ignore_eos`` with ``max_tokens`` makes output lengths exact.

Ids are drawn from [3, 0.99 * vocab): the lowest ids and the top of the vocabulary are where models
keep their special tokens.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nova_search.errors import SpecError
from nova_search.spec import LenRange, ModelSpec, WorkloadSpec


@dataclass(frozen=True, slots=True)
class Prompt:
    token_ids: tuple[int, ...]
    output_len: int


def vocab_size(model: ModelSpec) -> int:
    if model.vocab_size is not None:
        return model.vocab_size
    cfg = Path(model.path) / "config.json"
    try:
        data = json.loads(cfg.read_text())
    except (OSError, ValueError):
        raise SpecError(
            f"model.vocab_size: not given and {cfg} cannot be read; set model.vocab_size "
            "for synthetic prompts"
        ) from None
    v = data.get("vocab_size") or data.get("text_config", {}).get("vocab_size")
    if not isinstance(v, int):
        raise SpecError(f"model.vocab_size: {cfg} has no integer vocab_size; set model.vocab_size")
    return v


def _length(rng: np.random.Generator, spec: int | LenRange) -> int:
    if isinstance(spec, LenRange):
        return int(rng.integers(spec.low, spec.high + 1))
    return spec


def synthetic(workload: WorkloadSpec, vocab: int, seed: int) -> Iterator[Prompt]:
    """An endless, seeded stream of prompts. The same seed gives the same prompts."""
    rng = np.random.default_rng(seed)
    high = max(4, int(vocab * 0.99))
    while True:
        n_in = _length(rng, workload.input_len)
        n_out = _length(rng, workload.output_len)
        ids = rng.integers(3, high, size=n_in)
        yield Prompt(token_ids=tuple(int(x) for x in ids), output_len=n_out)


def level_seed(base: int, level_index: int, repeat: int = 0, warmup: bool = False) -> int:
    """A different seed per level, repeat and phase, so the prefix cache never sees a prompt twice."""
    return base * 1_000_003 + level_index * 1_009 + repeat * 7 + (1 if warmup else 0) * 104_729
