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
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("vllm_bench_worker.py")


@dataclass(frozen=True)
class CrossCheckPlan:
    input_len: int = 96
    output_len: int = 48
    concurrency: int = 4
    num_requests: int = 48
    warmups: int = 4
    #: peer/nova pairs, run in ABBA order
    pairs: int = 6
    #: the cores both clients run on (never the server's), as taskset takes them: "1", "8-15"
    client_cpus: str = "1"
    #: nova's client processes (``bench --processes``); None: auto
    processes: int | None = None
    #: vocabulary nova draws prompt ids below (the tiny model's)
    vocab_size: int = 2048
    seed: int = 0
    #: how nova sends its prompts: ``ids`` (token ids) or ``text`` (random text of the same token
    #: length, tokenized by the server, as vLLM's random dataset sends it: the same work for the server)
    prompt_format: str = "ids"
    #: the tokenizer folder nova needs for ``prompt_format="text"``
    tokenizer: str | None = None
    #: nova opens every connection before the window (its default outside the cross-check)
    preconnect: bool = False


@dataclass(frozen=True)
class Figures:
    """One run of one client, in the terms both clients share."""

    output_throughput: float
    ttft_p50_ms: float
    tpot_p50_ms: float
    completed: int
    failed: int
    input_tokens: int
    output_tokens: int
    duration_s: float
    #: nova only: the busiest client process's CPU share, the processes, the client-bound flag
    client_cpu_share: float | None = None
    processes: int | None = None
    client_bound: bool | None = None
    #: mean TTFT, ms (both clients report it; compared with the server's own mean from /metrics)
    ttft_mean_ms: float | None = None


METRICS = ("output_throughput", "ttft_p50_ms", "tpot_p50_ms")


# -- what else ran on the server's cores -------------------------------------------------------------


def _cpu_busy_s(cpus: set[int]) -> float:
    """Busy seconds of these cores since boot (/proc/stat: all but idle and iowait)."""
    tck = os.sysconf("SC_CLK_TCK")
    busy = 0
    for line in Path("/proc/stat").read_text().splitlines():
        name, *values = line.split()
        if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus:
            v = [int(x) for x in values]
            busy += sum(v) - v[3] - v[4]
    return busy / tck


def group_cpu_s(pgid: int) -> float:
    """CPU seconds (user + system) of the live processes of one process group."""
    tck = os.sysconf("SC_CLK_TCK")
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:
            total += int(fields[11]) + int(fields[12])
    return total / tck


@dataclass(frozen=True)
class HostLoad:
    """Who used the cores during a run, in shares of the cores' time (1.0 = one core busy): the server
    on its cores, everything else on them (other engineers' servers and tests, on a shared machine),
    and everything but the client on the client's cores (a busy neighbour there delays the client's
    reads, and on a small VM slows the server's core too)."""

    server_share: float
    others_share: float
    client_others_share: float = 0.0

    @property
    def worst(self) -> float:
        return max(self.others_share, self.client_others_share)


#: (monotonic time, busy s of the server's cores, CPU s of the server, busy s of the client's cores)
Snapshot = tuple[float, float, float, float]


class CoreWatch:
    """Measures ``HostLoad`` over a stretch of time, for a server running as process group ``pgid``
    pinned to ``cpus`` and clients pinned to ``client_cpus``."""

    def __init__(self, pgid: int, cpus: set[int], client_cpus: set[int]) -> None:
        self.pgid, self.cpus, self.client_cpus = pgid, cpus, client_cpus

    @classmethod
    def of(cls, pid: int, client_cpus: str) -> CoreWatch:
        """For a server started in its own session (nova's ``Server``: ``server.proc.pid``)."""
        from nova_search.spec import parse_cores

        clients = set(parse_cores(client_cpus))
        return cls(os.getpgid(pid), os.sched_getaffinity(pid), clients)

    def snapshot(self) -> Snapshot:
        return (
            time.monotonic(),
            _cpu_busy_s(self.cpus),
            group_cpu_s(self.pgid),
            _cpu_busy_s(self.client_cpus),
        )

    def wait_quiet(self, limit: float, until: float | None, probe_s: float = 0.5) -> bool:
        """Wait until a ``probe_s`` stretch in which other processes took at most ``limit`` of the
        server's cores and of the client's (the server and the clients idle between runs), or until
        ``until`` (``time.monotonic``); whether it came."""
        while True:
            before = self.snapshot()
            time.sleep(probe_s)
            if self.load(before, self.snapshot()).worst <= limit:
                return True
            if until is not None and time.monotonic() > until:
                return False

    @staticmethod
    def load(before: Snapshot, after: Snapshot, client_cpu_s: float = 0.0) -> HostLoad:
        """The load between two snapshots; ``client_cpu_s``: what the client used meanwhile."""
        wall = max(after[0] - before[0], 1e-9)
        server = after[2] - before[2]
        return HostLoad(
            server_share=server / wall,
            others_share=max(0.0, after[1] - before[1] - server) / wall,
            client_others_share=max(0.0, after[3] - before[3] - client_cpu_s) / wall,
        )


def _proc_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def peer_figures(result: dict) -> Figures:
    """``vllm bench serve``'s result -> Figures."""
    return Figures(
        output_throughput=float(result["output_throughput"]),
        ttft_p50_ms=float(result["median_ttft_ms"]),
        tpot_p50_ms=float(result["median_tpot_ms"]),
        completed=int(result["completed"]),
        failed=int(result["failed"]),
        input_tokens=int(result["total_input_tokens"]),
        output_tokens=int(result["total_output_tokens"]),
        duration_s=float(result["duration"]),
        ttft_mean_ms=_float(result.get("mean_ttft_ms")),
    )


def _float(v: object) -> float | None:
    return float(v) if isinstance(v, (int, float)) else None


def peer_requests(result: dict) -> list[dict]:
    """``vllm bench serve``'s per-request figures (its result with ``--save-detailed``), as rows like
    nova's ``--requests-out``: send time from the run's first send, TTFT, end-to-end (TTFT plus the
    inter-token gaps: the time of the last chunk with text), output tokens, success."""
    starts = result.get("start_times") or []
    if not starts:
        return []
    origin = min(starts)
    rows = []
    for st, ttft, itl, out, err in zip(
        starts, result["ttfts"], result["itls"], result["output_lens"], result["errors"], strict=True
    ):
        ok = not err and ttft > 0
        rows.append(
            {
                "send_s": round(st - origin, 6),
                "ttft_ms": round(ttft * 1000, 3) if ok else None,
                "e2e_ms": round((ttft + sum(itl)) * 1000, 3) if ok else None,
                "output_tokens": out,
                "success": ok,
            }
        )
    return sorted(rows, key=lambda r: r["send_s"])


def nova_figures(level: dict) -> Figures:
    """One level of ``nova-search bench --format json`` -> Figures."""
    return Figures(
        output_throughput=float(level["output_throughput"]),
        ttft_p50_ms=float(level["ttft_p50_ms"]),
        tpot_p50_ms=float(level["tpot_p50_ms"]),
        completed=int(level["completed"]),
        failed=int(level["errors"]),
        input_tokens=int(level["input_tokens"]),
        output_tokens=int(level["output_tokens"]),
        duration_s=float(level["duration_s"]),
        client_cpu_share=level.get("client_cpu_share"),
        processes=level.get("client_processes"),
        client_bound=level.get("client_bound"),
        ttft_mean_ms=_float(level.get("ttft_mean_ms")),
    )


def vllm_bench_args(
    base_url: str,
    model: str,
    tokenizer: str | Path,
    *,
    input_len: int,
    output_len: int,
    num_requests: int,
    concurrency: int,
    warmups: int,
    seed: int,
) -> list[str]:
    """``vllm bench serve`` arguments: the random dataset at fixed lengths (range ratio 0), exact
    outputs (``--ignore-eos``), greedy, closed loop at ``concurrency``, ``warmups`` warmup requests
    and no extra ready-check request."""
    return [
        "--backend",
        "vllm",
        "--base-url",
        base_url,
        "--model",
        model,
        "--tokenizer",
        str(tokenizer),
        "--dataset-name",
        "random",
        "--random-input-len",
        str(input_len),
        "--random-output-len",
        str(output_len),
        "--random-range-ratio",
        "0",
        "--num-prompts",
        str(num_requests),
        "--max-concurrency",
        str(concurrency),
        "--num-warmups",
        str(warmups),
        "--ready-check-timeout-sec",
        "0",
        "--ignore-eos",
        "--temperature",
        "0",
        "--seed",
        str(seed),
        "--disable-tqdm",
    ]


def peer_args(plan: CrossCheckPlan, base_url: str, model: str, tokenizer: str | Path, seed: int) -> list[str]:
    return vllm_bench_args(
        base_url,
        model,
        tokenizer,
        input_len=plan.input_len,
        output_len=plan.output_len,
        num_requests=plan.num_requests,
        concurrency=plan.concurrency,
        warmups=plan.warmups,
        seed=seed,
    ) + ["--save-detailed"]  # per-request start times and TTFTs in the result (peer_requests)


def nova_argv(
    plan: CrossCheckPlan, base_url: str, model: str, seed: int, requests_out: Path | None = None
) -> list[str]:
    return [
        "taskset",
        "-c",
        plan.client_cpus,
        sys.executable,
        "-m",
        "nova_search",
        "bench",
        "--url",
        base_url,
        "--model",
        model,
        "--concurrency",
        str(plan.concurrency),
        "--input-len",
        str(plan.input_len),
        "--output-len",
        str(plan.output_len),
        "--num-requests",
        str(plan.num_requests),
        "--warmup",
        str(plan.warmups),
        "--vocab-size",
        str(plan.vocab_size),
        "--seed",
        str(seed),
        "--cpus",
        plan.client_cpus,
        "--processes",
        str(plan.processes) if plan.processes is not None else "auto",
        # connections as vLLM's client has them: those its warmup opened, the rest opened in the window
        "--preconnect" if plan.preconnect else "--no-preconnect",
        "--prompt-format",
        plan.prompt_format,
        *(["--tokenizer", plan.tokenizer] if plan.tokenizer else []),
        *(["--requests-out", str(requests_out)] if requests_out is not None else []),
        "--format",
        "json",
    ]


class PeerClient:
    """A running ``vllm bench serve`` worker (benchmarks/harness/vllm_bench_worker.py), pinned."""

    def __init__(self, proc: subprocess.Popen[str], log: Path) -> None:
        self._proc = proc
        self.log = log

    def cpu_s(self) -> float:
        """The worker's CPU seconds so far (``taskset`` execs it: same pid)."""
        return _proc_cpu_s(self._proc.pid)

    def run(self, args: Sequence[str], timeout_s: float = 300.0, env: dict[str, str] | None = None) -> dict:
        """One ``vllm bench serve`` run; ``env`` is set in the worker first (a new server's API key)."""
        proc = self._proc
        assert proc.stdin is not None and proc.stdout is not None
        request = {"args": list(args), "env": env} if env else list(args)
        proc.stdin.write(json.dumps(request) + "\n")
        proc.stdin.flush()
        while True:  # vLLM's benchmark code prints INFO lines on stdout on a GPU: skip what is not JSON
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError(f"vllm bench worker exited ({proc.poll()}); see {self.log}")
            if line.lstrip().startswith("{"):
                break
        answer = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"vllm bench serve failed: {answer['error']}\n{answer.get('traceback', '')}")
        return answer


@contextmanager
def peer_client(engine_python: str, cpus: str, api_key: str | None, log: Path) -> Iterator[PeerClient]:
    """Start the vLLM benchmark worker pinned to ``cpus``; it reads the API key from OPENAI_API_KEY."""
    env = dict(os.environ)
    if api_key:
        env["OPENAI_API_KEY"] = api_key
    with open(log, "w") as err:
        proc = subprocess.Popen(
            ["taskset", "-c", cpus, engine_python, str(WORKER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env=env,
        )
        try:
            assert proc.stdout is not None
            ready = proc.stdout.readline()
            if not ready:
                raise RuntimeError(f"vllm bench worker did not start; see {log}")
            yield PeerClient(proc, log)
        finally:
            if proc.stdin is not None:
                proc.stdin.close()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def nova_run(
    plan: CrossCheckPlan,
    base_url: str,
    model: str,
    api_key: str | None,
    seed: int,
    timeout_s: float = 600.0,
    requests_out: Path | None = None,
) -> dict:
    """``nova-search bench --format json`` at one level, pinned; its one LevelResult as a dict (every
    measured request also in ``requests_out``, as ``bench --requests-out`` writes them)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    if api_key:
        env["NOVA_BENCH_API_KEY"] = api_key
    r = subprocess.run(
        nova_argv(plan, base_url, model, seed, requests_out),
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    if r.returncode != 0:
        raise RuntimeError(f"nova-search bench failed ({r.returncode}): {r.stderr[-2000:]}")
    (level,) = json.loads(r.stdout)["levels"]
    return level


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
        cpu0 = client.cpu_s() if who == "peer" else _children_cpu_s()
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
        cpu = (client.cpu_s() if who == "peer" else _children_cpu_s()) - cpu0
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


@dataclass(frozen=True)
class MetricComparison:
    """One metric over the clean pairs."""

    metric: str
    peer: tuple[float, ...]
    nova: tuple[float, ...]

    @property
    def peer_median(self) -> float:
        return statistics.median(self.peer)

    @property
    def nova_median(self) -> float:
        return statistics.median(self.nova)

    @property
    def rel_diff(self) -> float:
        """(nova - peer) / peer, of the two clients' medians."""
        return (self.nova_median - self.peer_median) / self.peer_median

    @property
    def pair_diffs(self) -> tuple[float, ...]:
        """(nova - peer) / peer within each pair."""
        return tuple((n - p) / p for p, n in zip(self.peer, self.nova, strict=True))

    @property
    def median_pair_diff(self) -> float:
        return statistics.median(self.pair_diffs)


def compare(pairs: Sequence[Pair]) -> dict[str, MetricComparison]:
    return {
        m: MetricComparison(
            m,
            tuple(getattr(p.peer.figures, m) for p in pairs),
            tuple(getattr(p.nova.figures, m) for p in pairs),
        )
        for m in METRICS
    }


LABELS = {
    "output_throughput": "output tok/s",
    "ttft_p50_ms": "median TTFT ms",
    "tpot_p50_ms": "median TPOT ms",
}


def report(check: CrossCheck) -> str:
    p = check.plan
    clean = check.clean
    lines = [
        f"input {p.input_len}, output {p.output_len}, concurrency {p.concurrency}, {p.num_requests} requests,"
        f" {p.warmups} warmups; clients on core(s) {p.client_cpus}; {len(check.pairs)} pairs in ABBA order,"
        f" {len(clean)} clean (others <= {check.others_limit:.0%} of the server's and the client's core)",
    ]
    for i, pair in enumerate(check.pairs):
        mark = "" if pair.clean(check.others_limit) else "   (set aside: other load)"
        first, second = (pair.peer, pair.nova) if pair.first == "peer" else (pair.nova, pair.peer)
        lines.append(f"pair {i}: {describe(first)}{mark}")
        lines.append(f"        {describe(second)}")
    if not clean:
        return "\n".join(lines)
    for m, c in compare(clean).items():
        lines.append(
            f"{LABELS[m]:>15}: vllm bench median {c.peer_median:8.2f} {[round(v, 2) for v in c.peer]}"
        )
        lines.append(
            f"{'':>15}  nova       median {c.nova_median:8.2f} {[round(v, 2) for v in c.nova]}"
            f"  (medians {c.rel_diff:+.1%}; median of pairs {c.median_pair_diff:+.1%};"
            f" per pair {[f'{d:+.1%}' for d in c.pair_diffs]})"
        )
    return "\n".join(lines)
