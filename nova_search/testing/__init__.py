"""What the tests and the benchmarks share (as ``optuna.testing`` is inside optuna): shipped with the
package, imported by ``tests/`` and ``benchmarks/``, never by the rest of ``nova_search``.

crosscheck   nova's client against vLLM's ``vllm bench serve`` on one server, in interleaved pairs
             (its vllm_bench_worker runs in vLLM's interpreter)
standin      a stand-in OpenAI-style streaming server (``python -m nova_search.testing.standin``)
fake_engine  the stand-in launched as vLLM is (``python -m nova_search.testing.fake_engine``)
engine       one real vLLM (CPU build, tiny model), pinned to its cores
pg           fresh PostgreSQL databases, a throwaway server, PgBouncer in front of one
specs        spec dicts: the stand-in engine's, the tiny CPU model's
workers      worker processes, the stand-in engines they leave
faults       a storm of storage faults against a running study
fault_table  the fault-injection suite's table: the row each fault test notes (``note``)
pair         the trained CPU pair's spec and a greedy completion of it

Nothing here needs a test-only package at import time (pytest, pytest-xdist): a module that needs one
imports it inside the function that does.
"""

from pathlib import Path

#: the repository root (a checkout's: the studies and the tiny model's spec live there)
REPO = Path(__file__).resolve().parents[2]
