"""nova's load generator against vLLM's own benchmark client (``vllm bench serve``) on one running vLLM.

Shared by the cross-check test (tests/integration/test_crosscheck_vllm_bench.py: the same workload on
both sides) and the benchmark that compares the figures (benchmarks/crosscheck_vllm_bench.py).

Apples to apples, run by run:

- the same server, and both clients pinned (``taskset``) to the same core, which is not the server's;
- the same lengths: vLLM's random dataset with range ratio 0 gives every prompt ``input_len`` tokens
  *as the server counts them* (it leaves room for the BOS the server adds to a text prompt; the
  prompt is re-aligned with the server's /tokenize), and ``--ignore-eos`` with ``output_len`` gives
  exact outputs; nova sends ``input_len`` random token ids (no BOS is added to ids) with
  ``ignore_eos``. Both sides' token totals are checked, from the server's own usage;
- the same concurrency, request count, greedy sampling (``--temperature 0``; nova always sends 0);
- equal warmups: ``--num-warmups`` requests at the same concurrency, and vLLM's extra single-request
  ready check is switched off (``--ready-check-timeout-sec 0``) so the peer gets no more warmup than
  nova;
- runs interleaved in ABBA order (peer, nova, nova, peer, peer, nova, ...), each run with seeds of its
  own: a slow drift of a shared host lands on both sides, and no run finds its prompts in the prefix
  cache from an earlier run.

The figures compared mean the same on both sides (see the README's metric definitions):

- output throughput: output tokens / the run's duration, from the first send to the last completion
  (vLLM: ``benchmark_duration``; nova: the window);
- median TTFT: the median over requests of first output chunk minus send;
- median TPOT: the median over requests of (last output chunk - first output chunk) / (tokens - 1).

Two differences remain by design and are small here: vLLM's warmups repeat the first prompt of the
run (so the first measured request finds its prompt in the prefix cache; one request of many), and
nova samples /metrics every 0.5 s while it measures (once before the window, then from half a
second in). nova asks for the final usage only, as vLLM's client does, unless its warmup shows
chunks of several tokens (speculative decoding).

Connections are made equal too: vLLM's client keeps the connections its warmups opened and opens the
others with the window's first requests, so nova runs with ``--no-preconnect`` here (by default it
opens every connection before the window).

nova runs on ``client_cpus`` (a taskset list such as ``8-15``) in ``processes`` client processes
(None: as many as it chooses for the level); its figures carry the busiest process's CPU share.

Its modules: plan (CrossCheckPlan, Figures), busy_cores (CoreWatch, HostLoad), clients (peer_client,
nova_run, the argv of both), runs (run_crosscheck, the ABBA pairs), compare (compare, report);
vllm_bench_worker runs in vLLM's interpreter. This package exposes the public names on purpose: the
cross-check test and benchmarks import them from ``nova_search.testing.crosscheck``.
"""

from nova_search.testing.crosscheck.busy_cores import CoreWatch, HostLoad, group_cpu_s
from nova_search.testing.crosscheck.clients import (
    PeerClient,
    nova_argv,
    nova_run,
    peer_args,
    peer_client,
    vllm_bench_args,
)
from nova_search.testing.crosscheck.compare import MetricComparison, compare, report
from nova_search.testing.crosscheck.plan import (
    CrossCheckPlan,
    Figures,
    nova_figures,
    peer_figures,
    peer_requests,
)
from nova_search.testing.crosscheck.runs import CrossCheck, Pair, Run, describe, run_crosscheck, run_pair

__all__ = [
    "CoreWatch",
    "CrossCheck",
    "CrossCheckPlan",
    "Figures",
    "HostLoad",
    "MetricComparison",
    "Pair",
    "PeerClient",
    "Run",
    "compare",
    "describe",
    "group_cpu_s",
    "nova_argv",
    "nova_figures",
    "nova_run",
    "peer_args",
    "peer_client",
    "peer_figures",
    "peer_requests",
    "report",
    "run_crosscheck",
    "run_pair",
    "vllm_bench_args",
]
