"""Spec dicts for tests and benchmarks: the stand-in engine's (no vLLM, for coordination tests) and
the tiny CPU model's (the real engine)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

from nova_search.spec import StudySpec, parse_spec
from nova_search.testing import REPO

#: the module a stand-in spec launches as its "engine" (nova_search/testing/fake_engine.py)
FAKE_ENGINE = "nova_search.testing.fake_engine"
#: which test process started a stand-in engine, passed on from the worker's environment like the knobs:
#: workers.fake_engines() counts only its own process's (tests/conftest.py sets it, one per process)
FAKE_ENGINE_TAG = "FAKE_ENGINE_TAG"
#: the stand-in's knobs, taken from each worker's environment (a server inherits nothing else of it)
FAKE_ENGINE_ENV = {
    name: f"${{{name}:-{default}}}"
    for name, default in (
        ("FAKE_ENGINE_BOOT_S", "0.2"),
        ("FAKE_ENGINE_TTFT_S", "0.005"),
        ("FAKE_ENGINE_ITL_S", "0.002"),
        ("FAKE_ENGINE_KNEE", "0"),
        ("FAKE_ENGINE_ERROR_EVERY", "0"),
        ("FAKE_ENGINE_CHILD", ""),
        ("FAKE_ENGINE_REFUSE", ""),
        ("FAKE_ENGINE_SLOW_WITH", ""),
        ("FAKE_ENGINE_RECORD", ""),
        (FAKE_ENGINE_TAG, ""),
    )
}


def minimal_spec_dict(**changes: object) -> dict[str, Any]:
    """One trial, one level, two requests on the stand-in engine."""
    raw: dict[str, Any] = {
        "name": "mini",
        "model": {"path": "fake-model", "served_name": "fake", "vocab_size": 1000},
        "engine": {
            "command": [sys.executable, "-m", FAKE_ENGINE],
            "device": "cpu",
            "env": dict(FAKE_ENGINE_ENV),
        },
        "sweep": {"concurrency": [1], "requests": 2},
        "objectives": [{"metric": "output_throughput", "direction": "maximize"}],
        "budget": {"n_trials": 1},
    }
    raw.update(changes)
    return raw


def fake_spec_dict(n_trials: int, **changes: object) -> dict[str, Any]:
    """A searched space of two knobs on the stand-in engine, levels 1 and 4, two objectives."""
    raw: dict[str, Any] = {
        "name": "dist",
        "model": {"path": "fake-model", "served_name": "fake", "vocab_size": 1000},
        "engine": {
            "command": [sys.executable, "-m", FAKE_ENGINE],
            "device": "cpu",
            "env": dict(FAKE_ENGINE_ENV),
            "boot_timeout_s": 30,
            "stop_timeout_s": 5,
        },
        "space": {
            "max_num_seqs": {"low": 1, "high": 256, "log": True},
            "enable_prefix_caching": {"choices": [True, False]},
        },
        "workload": {"input_len": 16, "output_len": 16},
        "sweep": {"concurrency": [1, 4], "warmup_requests": 1, "requests": 8},
        "objectives": [
            {"metric": "output_throughput", "direction": "maximize"},
            {"metric": "ttft_p99_ms", "direction": "minimize", "at": 4},
        ],
        "budget": {"n_trials": n_trials},
        "baselines": [],
    }
    raw.update(changes)
    return raw


def fake_spec(n_trials: int, **changes: object) -> StudySpec:
    return parse_spec(fake_spec_dict(n_trials, **changes))


def tiny_spec(model: Path, **changes: object) -> dict[str, Any]:
    """studies/tiny-cpu.yaml pointed at ``model``, smaller and faster, with top-level changes."""
    raw = yaml.safe_load((REPO / "studies" / "tiny-cpu.yaml").read_text())
    raw["model"]["path"] = str(model)
    raw["space"]["speculative"]["drafters"]["draft_model"] = str(model)
    raw["sweep"] = {
        "concurrency": [1, 2],
        "warmup_requests": 1,
        "requests": 6,
        "request_timeout_s": 120,
        "client_cpus": [1],
    }
    raw["workload"] = {"input_len": 64, "output_len": 24, "seed": 0}
    raw["objectives"] = [
        {"metric": "output_throughput", "direction": "maximize", "at": "best"},
        {"metric": "ttft_p99_ms", "direction": "minimize", "at": 2},
    ]
    raw["constraints"] = ["ttft_p99_ms <= 60000 at concurrency 2"]
    raw.update(changes)
    return raw
