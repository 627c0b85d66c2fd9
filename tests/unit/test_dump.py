"""`nova-search dump` on a study recorded on a real H200 (benchmarks/results/h200-qwen3-8b/study.db)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RECORDED = REPO / "benchmarks" / "results" / "h200-qwen3-8b" / "study.db"


def test_dump_writes_every_trial_with_profile_timing_and_device(tmp_path: Path) -> None:
    db = tmp_path / "study.db"
    shutil.copy(RECORDED, db)  # never touch the recorded file
    out = tmp_path / "study.json"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "nova_search",
            "dump",
            "h200-qwen3-8b",
            "--storage",
            f"sqlite:///{db}",
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    d = json.loads(out.read_text())
    assert d["study"] == "h200-qwen3-8b"
    assert d["objectives"] == ["output_throughput@best", "ttft_p99_ms@64"]
    assert len(d["trials"]) == 12
    states = [t["state"] for t in d["trials"]]
    assert states.count("COMPLETE") == 9 and states.count("PRUNED") == 3
    stock = d["trials"][0]
    assert stock["role"] == "stock" and stock["device_name"] == "NVIDIA H200"
    assert stock["engine_version"] == "0.26.0"
    assert [lv["concurrency"] for lv in stock["levels"]] == [1, 16, 64, 128]
    assert stock["timing"]["boot_s"] > 0 and stock["timing"]["measure_s"] > 0
    assert stock["argv"][:3] == ["python3", "-m", "vllm.entrypoints.openai.api_server"]


def test_dump_of_a_missing_study_is_one_clear_error(tmp_path: Path) -> None:
    db = tmp_path / "study.db"
    shutil.copy(RECORDED, db)
    out = tmp_path / "x.json"
    r = subprocess.run(
        [sys.executable, "-m", "nova_search", "dump", "nope", "--storage", f"sqlite:///{db}", "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode != 0
    assert "no study named 'nope'" in r.stderr and "h200-qwen3-8b" in r.stderr
    assert not out.exists()
