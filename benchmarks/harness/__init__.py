"""What the benchmarks share with the tests, and the tests import from here (``benchmarks.harness.<x>``):

crosscheck         nova's client against vLLM's ``vllm bench serve`` on one server, in interleaved pairs
vllm_bench_worker  the process that runs vLLM's benchmark client for the cross-check
standin            a stand-in OpenAI-style streaming server; fake_engine launches it like vLLM
engine             one real vLLM (CPU build, tiny model), pinned to its cores
pg                 fresh PostgreSQL databases, a throwaway server
specs              spec dicts: the stand-in engine's, the tiny CPU model's
workers            worker processes, the stand-in engines they leave
faults             a storm of storage faults against a running study
pair               the trained CPU pair's spec and a greedy completion of it
"""

from pathlib import Path

#: the repository root
REPO = Path(__file__).resolve().parents[2]
