"""Cross-check against a peer: vLLM's own benchmark client (``vllm bench serve``) and nova's load
generator (``nova-search bench``) drive the same running vLLM (CPU, tiny model) with the same lengths,
concurrency, request count, greedy sampling and warmups, both pinned to the core the server does not
use, in interleaved ABBA pairs. Their output throughput must agree within 5 % and their median TTFT
and TPOT within 10 %. What "the same" means, run by run, is in tests/support/crosscheck.py;
benchmarks/crosscheck_vllm_bench.py prints the same comparison on a server of its own.

On a shared machine other processes take turns on the server's core (other engineers' servers and
tests), and a run that shares it measures them, not the clients; a busy neighbour on the clients' core
delays their reads and, on this small VM, slows the server's core as well. Each run records who used
both cores, a pair in which others took more than 10 % of either during either run is set aside and
replaced, and each pair waits for a quiet moment first. With too few clean pairs the test fails and
says how busy the cores were: an unjudged cross-check is not a pass.
"""

from __future__ import annotations

import pytest

from tests.support.crosscheck import CoreWatch, CrossCheckPlan, compare, report, run_crosscheck

pytestmark = pytest.mark.slow

PLAN = CrossCheckPlan(input_len=96, output_len=48, concurrency=4, num_requests=48, warmups=4, pairs=5)
TOLERANCE = {"output_throughput": 0.05, "ttft_p50_ms": 0.10, "tpot_p50_ms": 0.10}


def test_nova_and_vllm_bench_agree_on_the_same_server(shared_vllm, engine_python, tiny_model, tmp_path):
    check = run_crosscheck(
        PLAN,
        shared_vllm.base_url,
        "tiny",
        shared_vllm.api_key,
        engine_python,
        tiny_model,
        tmp_path,
        watch=CoreWatch.of(shared_vllm.proc.pid, PLAN.client_cpus),
        others_limit=0.10,
        max_pairs=10,
        budget_s=150,
    )
    text = report(check)
    print(text)  # the figures of every run, for the record (pytest -s) and for a failure

    # every run measured what was asked: no failures, exact lengths as the server counted them
    for pair in check.pairs:
        for run in (pair.peer, pair.nova):
            f = run.figures
            assert (f.completed, f.failed) == (PLAN.num_requests, 0), text
            assert f.output_tokens == PLAN.num_requests * PLAN.output_len, text
        assert pair.nova.figures.input_tokens == PLAN.num_requests * PLAN.input_len, text
        # vLLM's random dataset decodes token ids to text and re-encodes it: a few tokens may move
        assert pair.peer.figures.input_tokens == pytest.approx(PLAN.num_requests * PLAN.input_len, rel=0.01)

    clean = check.clean
    assert len(clean) >= PLAN.pairs, (
        f"only {len(clean)} of {len(check.pairs)} pairs ran with the server's and the clients' cores free "
        f"of other load (<= 10 %); the host was too busy to judge the cross-check\n{text}"
    )
    for metric, c in compare(clean).items():
        # paired: the median over pairs of nova's relative difference from the peer run next to it
        assert abs(c.median_pair_diff) <= TOLERANCE[metric], f"{metric}\n{text}"
        # and the two clients' own medians
        assert abs(c.rel_diff) <= TOLERANCE[metric], f"{metric}\n{text}"


def test_vllm_bench_streams_from_the_standin(standin, engine_python, tiny_model, tmp_path):
    """benchmarks/client_overhead.py runs vLLM's benchmark client against the stand-in: the stand-in
    speaks enough of the API for it (/v1/completions streamed with usage, /metrics; /tokenize is
    missing and vLLM goes on without aligning prompts)."""
    from tests.support.crosscheck import peer_client, vllm_bench_args

    srv = standin()
    n, out = 20, 16
    with peer_client(engine_python, "1", None, tmp_path / "vllm-bench.log") as client:
        result = client.run(
            vllm_bench_args(
                srv.base_url,
                srv.model,
                tiny_model,
                input_len=32,
                output_len=out,
                num_requests=n,
                concurrency=4,
                warmups=2,
                seed=0,
            )
        )
    assert (result["completed"], result["failed"]) == (n, 0)
    assert result["total_output_tokens"] == n * out
    assert result["client_cpu_s"] > 0
    st = srv.stats()
    assert st.requests == n + 2 and st.completed == n + 2 and st.max_in_flight <= 4
