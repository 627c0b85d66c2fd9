"""benchmarks/memory_estimate.py run as a script on the committed H200 logs
(benchmarks/results/h200-qwen3-8b): the estimate before boot would have pruned none of the configurations
that booted. (The estimate and its rule: tests/unit/test_memory.py.)"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support import REPO

pytestmark = pytest.mark.recorded


def test_the_benchmark_never_prunes_a_configuration_that_booted() -> None:
    """benchmarks/memory_estimate.py on the committed H200 logs: 9 boots, none pruned, the bound above
    vLLM's KV memory every time."""
    argv = [sys.executable, "-m", "benchmarks.memory_estimate"]
    r = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "9 boots" in r.stdout and "would prune: 0" in r.stdout
    assert "| yes |" not in r.stdout
