"""Small spec builders shared by tests that need no engine."""

from __future__ import annotations

import sys


def minimal_spec_dict(**changes: object) -> dict:
    raw: dict = {
        "name": "mini",
        "model": {"path": "fake-model", "served_name": "fake", "vocab_size": 1000},
        "engine": {"command": [sys.executable, "-m", "tests.support.fake_engine"], "device": "cpu"},
        "sweep": {"concurrency": [1], "requests": 2},
        "objectives": [{"metric": "output_throughput", "direction": "maximize"}],
        "budget": {"n_trials": 1},
    }
    raw.update(changes)
    return raw
