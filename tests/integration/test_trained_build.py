"""The GPU pair's build path, run on this machine's CPU with the engine's torch: a site folder's
sources as the corpus (``--corpus``), and per-model time budgets that cut the planned steps short.
The H200 runs the same code with ``device: cuda`` (benchmarks/gpu/trained_study.sh)."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

import nova_search
from nova_search.models.trained.build import TrainPlan, build_trained_pair

pytestmark = pytest.mark.engine


def test_a_pair_from_a_site_folder_within_time_budgets(engine_python: str, tmp_path: Path) -> None:
    site = tmp_path / "site"
    shutil.copytree(Path(nova_search.__file__).parent, site / "nova_search")  # ~1 MB of real Python
    plan = replace(
        TrainPlan(),
        target_steps=400,
        draft_steps=400,
        eagle3_steps=400,
        batch=4,
        seq_len=64,
        warmup=5,
        records=20,
        budgets_s=(0.001, 0.001, 0.001),  # past its first timed steps, no more fit
    )
    report = build_trained_pair(tmp_path / "pair", engine_python, plan, packages=site)
    for name in ("target", "draft", "eagle3"):
        model = report[name]
        assert model["steps_planned"] == 400 and model["steps"] == 12, name  # cut after 11 timed steps
        assert model["tokens_seen"] == 12 * 4 * 64
    assert report["corpus"]["train"]["files"] > 20 and report["corpus"]["held_out"]["files"] > 0
    pair = tmp_path / "pair"
    assert (pair / "model.safetensors").exists() and (pair / "draft" / "model.safetensors").exists()
    assert (pair / "eagle3" / "model.safetensors").exists()
    records = [json.loads(line) for line in (pair / "workload.jsonl").read_text().splitlines()]
    assert 0 < len(records) <= 20
    assert json.loads((pair / "report.json").read_text())["key"] == report["key"]
    kept = build_trained_pair(tmp_path / "pair", engine_python, plan, packages=site)
    assert kept == json.loads(json.dumps(report))  # the same key: kept, not built again
