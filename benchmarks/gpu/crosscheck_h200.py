"""Cross-check on a GPU: nova's load generator against ``vllm bench serve`` on one running vLLM server,
shape by shape, in ABBA pairs, written as ``summary.json`` plus a table (``summary.md``).

The server is already running (started by whoever runs this, on cores of its own); this script only
drives it. Both clients run on ``--client-cpus`` (nova split into as many processes as it chooses,
``--processes`` to force a number). What is made equal on both sides, run by run, is in
nova_search/testing/crosscheck/: same lengths (vLLM's random dataset at range ratio 0; nova's random
token ids), same concurrency, request count, warmups, greedy sampling, ``ignore_eos``.

Pairs go round robin over the shapes (pair 0 of every shape, then pair 1, ...), so a run cut short
still has the same number of pairs for every shape; ``summary.json`` is rewritten after every pair.
Every run is also appended to ``runs.jsonl`` with all its figures.

    PYTHONPATH=/tmp/site:$PWD python3 -m benchmarks.gpu.crosscheck_h200 \\
        --url http://127.0.0.1:8000 --model qwen3-8b --tokenizer /path/to/model \\
        --client-cpus 8-15 --pairs 3 --out benchmarks/results/crosscheck-h200

``--shapes`` takes ``IN/OUT@CONCURRENCY:REQUESTS`` items separated by commas (default: the five
shapes of the issue, ``DEFAULT_SHAPES``), each optionally ending in ``pN`` to run nova in N processes
for that shape (``128/512@512:1024p1``: the same shape twice, once with ``p1``, compares the split)
and in ``pre`` to let nova open its connections before the window (``128/512@512:1024p8pre``);
``--engine-python`` the interpreter that imports vLLM
(default ``python3``, with vLLM on ``PYTHONPATH``); the API key comes from ``--api-key`` or
``NOVA_BENCH_API_KEY`` (none by default). The goal it reports against: medians within 3 % in output
throughput and within 5 % in median TTFT and median TPOT, and no client-bound nova run.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from benchmarks.gpu.server_watch import ServerWatch
from nova_search.testing.crosscheck import (
    CrossCheckPlan,
    Figures,
    Pair,
    Run,
    describe,
    peer_client,
    run_pair,
)

REPO = Path(__file__).resolve().parents[2]

#: the issue's shapes; requests chosen so that 5 shapes x 3 pairs x 2 clients take about 7 minutes on
#: one H200 with the Qwen3-8B shape (from the issue's figures: 2.5k tok/s at c=16, 3.2k at c=64 with
#: 1024-token prompts, 14k at c=256): 3-4 waves of the closed loop below 256 (6-10 s a run), one
#: wave of 512-token outputs at 256 and 512 (about 9 s and 13 s); plus 16 warmups and about 3 s of
#: start-up a run
DEFAULT_SHAPES = "512/256@16:64,1024/128@64:192,128/512@256:256,128/512@512:512,2048/128@64:192"
DEFAULT_WARMUPS = 16
#: the goal, as relative differences of the medians
GOAL = {"output_throughput": 0.03, "ttft_p50_ms": 0.05, "tpot_p50_ms": 0.05}
SUMMARY_KEYS = ("output_throughput", "ttft_p50_ms", "tpot_p50_ms")


@dataclass(frozen=True)
class Shape:
    input_len: int
    output_len: int
    concurrency: int
    num_requests: int
    #: nova's client processes for this shape (``...:REQUESTSpN``); None: ``--processes``
    processes: int | None = None
    #: nova opens its connections before the window (``...:REQUESTS[pN]pre``)
    preconnect: bool = False

    @classmethod
    def parse(cls, text: str) -> Shape:
        try:
            lens, rest = text.strip().split("@")
            conc, tail = rest.split(":")
            m = re.fullmatch(r"(\d+)(?:p(\d+))?(pre)?", tail)
            if m is None:
                raise ValueError(tail)
            inp, out = lens.split("/")
            procs = int(m.group(2)) if m.group(2) else None
            return cls(int(inp), int(out), int(conc), int(m.group(1)), procs, bool(m.group(3)))
        except ValueError:
            raise SystemExit(
                f"--shapes: {text!r} is not IN/OUT@CONCURRENCY:REQUESTS[pPROCESSES][pre]"
            ) from None

    @property
    def label(self) -> str:
        procs = f" nova processes={self.processes}" if self.processes else ""
        pre = " preconnect" if self.preconnect else ""
        return f"{self.input_len}/{self.output_len} c={self.concurrency} n={self.num_requests}{procs}{pre}"


def vocab_size(model_dir: Path) -> int:
    """The model's vocabulary (prompt ids are drawn below 0.99 of it), from config.json."""
    cfg = json.loads((model_dir / "config.json").read_text())
    v = cfg.get("vocab_size") or cfg.get("text_config", {}).get("vocab_size")
    if not isinstance(v, int):
        raise SystemExit(f"{model_dir}/config.json has no vocab_size")
    return v


def pair_entry(pair: Pair) -> dict:
    peer, nova = pair.peer.figures, pair.nova.figures
    return {
        "peer": {k: getattr(peer, k) for k in SUMMARY_KEYS},
        "nova": {
            **{k: getattr(nova, k) for k in SUMMARY_KEYS},
            "client_cpu_share": nova.client_cpu_share,
            "processes": nova.processes,
        },
    }


def summary(shapes: list[Shape], pairs: dict[Shape, list[Pair]]) -> list[dict]:
    def head(s: Shape) -> dict:
        d = asdict(s)
        if d.pop("processes") is not None:
            d["nova_processes_forced"] = s.processes
        if d.pop("preconnect"):
            d["nova_preconnect"] = True
        return d

    return [{**head(s), "pairs": [pair_entry(p) for p in pairs[s]]} for s in shapes]


def table(shapes: list[Shape], pairs: dict[Shape, list[Pair]]) -> str:
    """The medians per shape, their relative difference, and whether each meets the goal."""
    lines = [
        "| shape (in/out, concurrency, requests) | pairs | vllm bench tok/s | nova tok/s | Δ | "
        "TTFT p50 ms vllm / nova | Δ | TPOT p50 ms vllm / nova | Δ | nova client CPU (max), procs | goal |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for s in shapes:
        ps = pairs[s]
        if not ps:
            continue
        med: dict[str, tuple[float, float, float]] = {}
        for k in SUMMARY_KEYS:
            peer = statistics.median(getattr(p.peer.figures, k) for p in ps)
            nova = statistics.median(getattr(p.nova.figures, k) for p in ps)
            med[k] = (peer, nova, (nova - peer) / peer)
        shares = [p.nova.figures.client_cpu_share or 0.0 for p in ps]
        procs = sorted({p.nova.figures.processes for p in ps if p.nova.figures.processes})
        bound = any(p.nova.figures.client_bound for p in ps)
        ok = all(abs(med[k][2]) <= GOAL[k] for k in GOAL) and not bound and len(ps) >= 3
        t, f, q = med["output_throughput"], med["ttft_p50_ms"], med["tpot_p50_ms"]
        lines.append(
            f"| {s.input_len}/{s.output_len}, c={s.concurrency}, {s.num_requests}"
            f"{f' (nova p={s.processes})' if s.processes else ''}{' (preconnect)' if s.preconnect else ''}"
            f" | {len(ps)} "
            f"| {t[0]:.0f} | {t[1]:.0f} | {t[2]:+.1%} | {f[0]:.1f} / {f[1]:.1f} | {f[2]:+.1%} "
            f"| {q[0]:.2f} / {q[1]:.2f} | {q[2]:+.1%} | {max(shares):.0%}, {'/'.join(map(str, procs))}"
            f"{' CLIENT-BOUND' if bound else ''} | {'met' if ok else 'missed'} |"
        )
    return "\n".join(lines)


def rebuild(runs: Path, out: Path) -> None:
    """summary.json and summary.md from a runs.jsonl that may hold several calls' runs. A pair is two
    adjacent rows of one shape and pair number, one of each client (the order every call writes them);
    shapes come in the order they first appear, pairs in the order they ran."""
    fields = set(Figures.__dataclass_fields__)
    pairs: dict[Shape, list[Pair]] = {}
    held: tuple[Shape, int, Run, str] | None = None
    for n, line in enumerate(runs.read_text().splitlines(), 1):
        r = json.loads(line)
        shape = Shape(**r["shape"])
        run = Run(r["client"], r["seed"], Figures(**{k: r[k] for k in fields if k in r}))
        pairs.setdefault(shape, [])
        if held is None:
            held = (shape, r["pair"], run, r["first"])
            continue
        shape0, i0, run0, first0 = held
        if (shape0, i0) != (shape, r["pair"]) or run0.client == run.client:
            raise SystemExit(f"{runs}:{n}: not the second run of {shape0.label}, pair {i0}")
        both = {run0.client: run0, run.client: run}
        pairs[shape].append(Pair(both["peer"], both["nova"], first0))
        held = None
    if held is not None:
        print(f"{runs}: the last run ({held[0].label}, pair {held[1]}) has no partner; left out")
    shapes = list(pairs)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary(shapes, pairs), indent=2) + "\n")
    text = table(shapes, pairs)
    (out / "summary.md").write_text(text + "\n")
    print(text)


def save_requests(folder: Path, shape: Shape, pair: int, run: Run) -> None:
    """A run's per-request rows (``Run.requests``) as gzipped JSON lines, one file per run."""
    if not run.requests:
        return
    folder.mkdir(parents=True, exist_ok=True)
    s = shape
    name = f"{s.input_len}-{s.output_len}-c{s.concurrency}-n{s.num_requests}-pair{pair}-{run.client}"
    with gzip.open(folder / f"{name}.jsonl.gz", "wt", encoding="utf-8") as f:
        f.writelines(json.dumps(row) + "\n" for row in run.requests)


def server_line(stats: dict) -> str:
    """One line of a run's server-side figures (server_watch.run_stats)."""

    def f(key: str, fmt: str) -> str:
        v = stats.get(key)
        return format(v, fmt) if isinstance(v, (int, float)) else "-"

    return (
        f"TTFT {f('server_ttft_mean_ms', '.0f')} ms, ITL {f('server_itl_mean_ms', '.2f')} ms, "
        f"queue {f('server_queue_mean_ms', '.0f')} ms, prefill {f('server_prefill_mean_ms', '.0f')} ms, "
        f"decode {f('server_decode_mean_ms', '.0f')} ms, front end {f('server_frontend_mean_ms', '.0f')} ms "
        f"(means); {f('server_tokens_per_step', '.0f')} "
        f"tokens/step at {f('server_steps_per_s', '.1f')} steps/s; running {f('server_running_mean', '.0f')} "
        f"(max {f('server_running_max', '.0f')}, full {f('server_full_share', '.0%')} of the time), "
        f"waiting max {f('server_waiting_max', '.0f')}"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--url", required=True, help="base URL of the running vLLM server")
    p.add_argument("--model", required=True, help="served model name")
    p.add_argument("--tokenizer", type=Path, required=True, help="model folder (config.json, tokenizer)")
    p.add_argument("--api-key", default=os.environ.get("NOVA_BENCH_API_KEY"))
    p.add_argument("--engine-python", default="python3", help="interpreter that imports vLLM")
    p.add_argument("--client-cpus", default="8-15", help="cores of both clients (taskset list)")
    p.add_argument("--processes", type=int, default=None, help="nova's client processes (default: auto)")
    p.add_argument("--shapes", default=DEFAULT_SHAPES)
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--warmups", type=int, default=DEFAULT_WARMUPS, help="warmup requests, both clients")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--prompt-format",
        choices=("text", "ids"),
        default="text",
        help="how nova sends prompts: text (tokenized by the server, as vllm bench serve's random dataset "
        "sends them; the default: the same work for the server on both sides) or ids",
    )
    p.add_argument("--budget-s", type=float, default=None, help="start no new round after this")
    p.add_argument(
        "--first-pair",
        type=int,
        default=0,
        help="number this call's pairs from K (a later call continues an earlier one's ABBA order and seeds)",
    )
    p.add_argument(
        "--api-servers", type=int, default=None, help="the server's --api-server-count, written to every run"
    )
    p.add_argument(
        "--rebuild",
        type=Path,
        default=None,
        help="write summary.json and summary.md in --out from this runs.jsonl (every call's runs) and stop",
    )
    p.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "crosscheck-h200")
    args = p.parse_args()

    if args.rebuild is not None:
        rebuild(args.rebuild, args.out)
        return
    shapes = [Shape.parse(t) for t in args.shapes.split(",") if t.strip()]
    vocab = vocab_size(args.tokenizer)
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="nova-crosscheck-h200-"))
    base = CrossCheckPlan(
        client_cpus=args.client_cpus,
        processes=args.processes,
        vocab_size=vocab,
        prompt_format=args.prompt_format,
        tokenizer=str(args.tokenizer) if args.prompt_format == "text" else None,
    )
    plans = {
        s: replace(
            base,
            input_len=s.input_len,
            output_len=s.output_len,
            concurrency=s.concurrency,
            num_requests=s.num_requests,
            warmups=args.warmups,
            pairs=args.pairs,
            seed=args.seed * 100 + k,
            processes=s.processes if s.processes is not None else args.processes,
            preconnect=s.preconnect,
        )
        for k, s in enumerate(shapes)
    }
    pairs: dict[Shape, list[Pair]] = {s: [] for s in shapes}
    runs_log = (args.out / "runs.jsonl").open("a")
    t0 = time.monotonic()
    print(f"{len(shapes)} shapes x {args.pairs} pairs, clients on cores {args.client_cpus}", flush=True)
    watch = ServerWatch(args.url, args.out / "server-metrics.jsonl", api_key=args.api_key)
    peer = peer_client(args.engine_python, args.client_cpus, args.api_key, work / "vllm-bench.log")
    with watch, peer as client:
        for i in range(args.first_pair, args.first_pair + args.pairs):
            if i > args.first_pair and args.budget_s is not None and time.monotonic() - t0 > args.budget_s:
                print(f"budget of {args.budget_s:.0f} s spent: stopping before pair {i}", flush=True)
                break
            for s in shapes:
                print(f"pair {i} of {s.label} ({time.monotonic() - t0:.0f} s)", flush=True)
                pair = run_pair(
                    client, plans[s], i, args.url, args.model, args.api_key, args.tokenizer, progress=True
                )
                pairs[s].append(pair)
                for run in (pair.peer, pair.nova):
                    row = {"shape": asdict(s), "pair": i, "first": pair.first, "client": run.client}
                    row["api_servers"] = args.api_servers
                    server = watch.run_stats(run.began, run.ended, s.concurrency)
                    print(f"    server during {run.client}: {server_line(server)}", flush=True)
                    row.update(seed=run.seed, began=run.began, ended=run.ended, **asdict(run.figures))
                    runs_log.write(json.dumps({**row, **server}) + "\n")
                    save_requests(args.out / "requests", s, i, run)
                runs_log.flush()
                (args.out / "summary.json").write_text(json.dumps(summary(shapes, pairs), indent=2) + "\n")
    text = table(shapes, pairs)
    (args.out / "summary.md").write_text(text + "\n")
    print(text)
    print(f"{time.monotonic() - t0:.0f} s; {args.out / 'summary.json'}; runs in {args.out / 'runs.jsonl'}")
    for s in shapes:
        for pair in pairs[s]:
            for run in (pair.peer, pair.nova):
                if run.figures.failed:
                    print(f"warning: {s.label}: {describe(run)} had {run.figures.failed} failed requests")


if __name__ == "__main__":
    main()
