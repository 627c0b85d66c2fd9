"""A cross-check's runs: peer/nova pairs in ABBA order (``run_crosscheck``), each run described in a line."""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from nova_search.testing.crosscheck.busy_cores import CoreWatch, HostLoad, children_cpu_s
from nova_search.testing.crosscheck.clients import PeerClient, nova_run, peer_args, peer_client
from nova_search.testing.crosscheck.plan import (
    CrossCheckPlan,
    Figures,
    nova_figures,
    peer_figures,
    peer_requests,
)


@dataclass(frozen=True)
class Run:
    client: str  # "peer" or "nova"
    seed: int
    figures: Figures
    load: HostLoad | None = None
    #: the client's own result: vllm bench serve's JSON, or nova's LevelResult as a dict
    raw: dict = field(default_factory=dict, repr=False, compare=False)
    #: wall-clock (time.time()) start and end of the whole run, client start-up and warmup included
    began: float = 0.0
    ended: float = 0.0
    #: every measured request: send time from the run's first send, TTFT, end-to-end, output tokens,
    #: success (``peer_requests`` for the peer, ``bench --requests-out`` rows for nova)
    requests: tuple[dict, ...] = field(default=(), repr=False, compare=False)


@dataclass(frozen=True)
class Pair:
    """Two adjacent runs, one of each client. ``first`` says which ran first (ABBA order)."""

    peer: Run
    nova: Run
    first: str

    def clean(self, others_limit: float) -> bool:
        """Whether neither run shared the server's cores, or the client's, with more than
        ``others_limit`` of other load."""
        return all(r.load is None or r.load.worst <= others_limit for r in (self.peer, self.nova))


@dataclass(frozen=True)
class CrossCheck:
    plan: CrossCheckPlan
    #: every pair run, in order, including those set aside for other load on the server's cores
    pairs: tuple[Pair, ...]
    others_limit: float

    @property
    def clean(self) -> tuple[Pair, ...]:
        return tuple(p for p in self.pairs if p.clean(self.others_limit))


def run_crosscheck(
    plan: CrossCheckPlan,
    base_url: str,
    model: str,
    api_key: str | None,
    engine_python: str,
    tokenizer: str | Path,
    work_dir: Path,
    watch: CoreWatch | None = None,
    others_limit: float = 0.10,
    max_pairs: int | None = None,
    budget_s: float | None = None,
    progress: bool = False,
) -> CrossCheck:
    """Drive one running server with both clients, pair by pair in ABBA order (peer, nova, nova,
    peer, ...), every run with seeds of its own, until ``plan.pairs`` pairs are clean: with a
    ``watch``, a pair in which other processes took more than ``others_limit`` of the server's cores
    or of the client's during either run is set aside (kept, reported, not judged) and another pair
    is run, up to ``max_pairs`` pairs in all (default: twice ``plan.pairs``) and no new pair after
    ``budget_s``. With a ``watch``, each pair first waits for a moment in which both are quiet."""
    limit = max_pairs if max_pairs is not None else 2 * plan.pairs
    stop_at = time.monotonic() + budget_s if budget_s is not None else None
    pairs: list[Pair] = []
    with peer_client(engine_python, plan.client_cpus, api_key, work_dir / "vllm-bench.log") as client:
        while len(pairs) < limit and sum(p.clean(others_limit) for p in pairs) < plan.pairs:
            if pairs and stop_at is not None and time.monotonic() > stop_at:
                break
            if watch is not None and not watch.wait_quiet(others_limit, stop_at):
                break
            pairs.append(
                run_pair(client, plan, len(pairs), base_url, model, api_key, tokenizer, watch, progress)
            )
    return CrossCheck(plan, tuple(pairs), others_limit)


def run_pair(
    client: PeerClient,
    plan: CrossCheckPlan,
    i: int,
    base_url: str,
    model: str,
    api_key: str | None,
    tokenizer: str | Path,
    watch: CoreWatch | None = None,
    progress: bool = False,
) -> Pair:
    """Pair ``i`` of a plan: peer then nova for even ``i``, nova then peer for odd (ABBA), each run
    with seeds of its own."""

    def one(who: str, seed: int) -> Run:
        cpu0 = client.cpu_s() if who == "peer" else children_cpu_s()
        before = watch.snapshot() if watch else None
        began = time.time()
        if who == "peer":
            raw = client.run(peer_args(plan, base_url, model, tokenizer, seed), 900.0)
            figures = peer_figures(raw)
            requests = peer_requests(raw)
            for key in ("start_times", "ttfts", "itls", "errors", "input_lens", "output_lens"):
                raw.pop(key, None)  # kept as ``requests``
        else:
            with tempfile.TemporaryDirectory(prefix="nova-crosscheck-") as tmp:
                out = Path(tmp) / "requests.jsonl"
                raw = nova_run(plan, base_url, model, api_key, seed, requests_out=out)
                requests = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
            figures = nova_figures(raw)
        after = watch.snapshot() if watch else None
        cpu = (client.cpu_s() if who == "peer" else children_cpu_s()) - cpu0
        load = CoreWatch.load(before, after, cpu) if before and after else None
        run = Run(who, seed, figures, load, raw, began, time.time(), tuple(requests))
        if progress:
            print(f"  {describe(run)}", flush=True)
        return run

    order = ("peer", "nova") if i % 2 == 0 else ("nova", "peer")
    runs = {who: one(who, plan.seed * 1000 + 2 * i + k) for k, who in enumerate(order)}
    return Pair(runs["peer"], runs["nova"], order[0])


def describe(run: Run) -> str:
    f = run.figures
    load = (
        f"  server {run.load.server_share:4.0%} of its core, others {run.load.others_share:4.0%} there"
        f" and {run.load.client_others_share:4.0%} on the client's"
        if run.load
        else ""
    )
    client = (
        f"  client {f.client_cpu_share:.0%} of a core (busiest of {f.processes})"
        + ("  CLIENT-BOUND" if f.client_bound else "")
        if f.client_cpu_share is not None
        else ""
    )
    mean = f" (mean {f.ttft_mean_ms:.1f})" if f.ttft_mean_ms is not None else ""
    return (
        f"{run.client:4} seed {run.seed:>4}: {f.output_throughput:7.1f} tok/s"
        f"  TTFT p50 {f.ttft_p50_ms:6.2f} ms{mean}  TPOT p50 {f.tpot_p50_ms:6.3f} ms{client}{load}"
    )
