"""The memory estimate against the real engine: the KV bytes a token nova computes from config.json
are what vLLM's CPU build itself allots (its log: "Auto set (X/…) GiB for KV cache", "CPU KV cache
size: N tokens"), on the shared tiny-model server."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from nova_search.engine.memory import GIB, ModelShape

pytestmark = pytest.mark.engine


def test_kv_bytes_a_token_match_the_cpu_engine(shared_vllm, tiny_model: Path) -> None:
    log = Path(shared_vllm.log_path).read_text(errors="replace")
    space = re.search(r"Auto set \(([\d.]+)/[\d.]+\) GiB for KV cache", log)
    tokens = re.search(r"KV cache size: ([\d,]+) tokens", log)
    assert space and tokens, "the engine's log has no KV cache lines:\n" + log[-2000:]
    gib, n = float(space.group(1)), int(tokens.group(1).replace(",", ""))
    shape = ModelShape.of(json.loads((tiny_model / "config.json").read_text()))
    assert shape is not None
    # the GiB figure is printed with 2 decimals: the engine's bytes a token lie within its rounding
    low, high = (gib - 0.005) * GIB / n, (gib + 0.005) * GIB / n
    assert low <= shape.kv_bytes_per_token() <= high, (gib, n, shape.kv_bytes_per_token())
