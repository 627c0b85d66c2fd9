"""benchmarks/gpu/study.sh carries vLLM's compile cache between sessions: `cache` packs the node's
VLLM_CACHE_ROOT into $OUT, `restore` (run by `start`) unpacks the carried copy named after the storage,
and never over a cache that is already there. The committed H200 run (benchmarks/results/h200-cache-carry)
shows a carried cache loaded on another machine."""

from __future__ import annotations

import gzip
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from tests.support import REPO

SCRIPT = REPO / "benchmarks" / "gpu" / "study.sh"
CARRY = REPO / "benchmarks" / "results" / "h200-cache-carry"
CONFIRM = REPO / "benchmarks" / "results" / "h200-qwen3-8b-confirm"


def _study_sh(step: str, work: Path, carried: Path, out: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "SPEC": "studies/experiments/h200-qwen3-8b-confirm.yaml",
        "W": str(work),
        "CARRIED": str(carried),
        "OUT": str(out),
    }
    return subprocess.run(
        ["bash", str(SCRIPT), step], cwd=REPO, env=env, capture_output=True, text=True, check=True
    )


def test_a_packed_cache_comes_back_in_the_next_sessions_work_folder(tmp_path: Path) -> None:
    first, out, carried = tmp_path / "first", tmp_path / "out", tmp_path / "h200"
    graph = first / "vllm-cache" / "torch_compile_cache" / "d0ef67a4e8" / "rank_0_0" / "backbone"
    graph.mkdir(parents=True)
    (graph / "computation_graph.py").write_text("compiled\n")
    _study_sh("cache", first, carried / "confirm-study.db", out)
    with tarfile.open(out / "vllm-cache.tar.xz") as tar:
        assert {Path(n).parts[0] for n in tar.getnames()} == {"vllm-cache"}

    carried.mkdir()
    (out / "vllm-cache.tar.xz").rename(carried / "confirm-study-vllm-cache.tar.xz")
    second = tmp_path / "second"
    second.mkdir()
    said = _study_sh("restore", second, carried / "confirm-study.db", out).stdout
    assert "compile cache from" in said
    restored = second / "vllm-cache" / "torch_compile_cache" / "d0ef67a4e8" / "rank_0_0" / "backbone"
    assert (restored / "computation_graph.py").read_text() == "compiled\n"

    (restored / "computation_graph.py").write_text("newer\n")  # a cache already there is kept
    assert _study_sh("restore", second, carried / "confirm-study.db", out).stdout == ""
    assert (restored / "computation_graph.py").read_text() == "newer\n"


def test_without_a_carried_cache_restore_does_nothing(tmp_path: Path) -> None:
    said = _study_sh("restore", tmp_path, tmp_path / "none.db", tmp_path / "out").stdout
    assert said == "" and not (tmp_path / "vllm-cache").exists()


def _log_of(archive: Path, trial: str) -> str:
    with tarfile.open(archive) as tar:
        member = tar.extractfile(f"artifacts/h200-qwen3-8b-confirm/{trial}/server.log")
        assert member is not None
        return member.read().decode()


@pytest.mark.recorded
def test_the_cache_key_was_the_same_on_two_machines_and_a_carried_cache_loaded() -> None:
    directory = "torch_compile_cache/d0ef67a4e8"
    assert directory in _log_of(CONFIRM / "server-logs-session3.excerpt.tgz", "trial-0008")
    trial_10 = _log_of(CONFIRM / "server-logs-session4.excerpt.tgz", "trial-0010")
    assert directory in trial_10 and "Compiling a graph for compile range (1, 4096)" in trial_10
    carried = gzip.open(CARRY / "carry.log.gz", "rt").read()
    assert directory in carried
    assert "Directly load the compiled graph(s) for compile range (1, 4096) from the cache" in carried
    assert "Compiling a graph" not in carried
    said = (CARRY / "carry.txt").read_text()
    assert "up after 87 s (alive: yes)" in said and said.rstrip().endswith("GPU after stop: 0 MiB")
