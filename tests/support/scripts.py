"""The benchmark scripts some tests check (their summaries of committed results, the replay, the H200
drafters), run by path: ``benchmark_script("gpu/trained_summary.py")`` runs benchmarks/gpu/trained_summary.py
as a script not named ``__main__`` (its ``main`` does not run) and gives its names. The tests import no
module of ``benchmarks``; what tests and benchmarks share is ``nova_search.testing``."""

from __future__ import annotations

import functools
import runpy
from types import SimpleNamespace

from tests.support import REPO


@functools.cache
def benchmark_script(path: str) -> SimpleNamespace:
    """benchmarks/``path``, run once per test process; its module-level names."""
    script = REPO / "benchmarks" / path
    return SimpleNamespace(**runpy.run_path(str(script), run_name=f"benchmark_script:{path}"))
