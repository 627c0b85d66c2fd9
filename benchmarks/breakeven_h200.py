"""The break-even map on a GPU (issue 43, deliverables 2 and 4): for one drafter (method, k) on the tuned
stack, the smallest synthetic acceptance length L at which it is verified better than the tuned server,
per concurrency level, found by bisection over L with ABBA windows against the resident tuned server.

One tuned server T stays up for the whole run; for each length L a drafter server D (the same flags plus
``--speculative-config`` with ``"rejection_sample_method": "synthetic"``) is booted, measured in ABBA
pairs against T at the levels whose bracket is still open (``analysis.breakeven.next_length``), and
stopped. Windows are nova's own load generator (``python -m nova_search bench``), one level each;
gains are ``analysis.noise.compare`` over the pairs (the median's relative difference, a bootstrap 95 %
interval). With ``--park sleep`` only one server is awake at a time (vLLM's sleep mode, level 1): for
models that do not fit twice. D's /metrics counters give the acceptance vLLM reports (it should be L).

Every gain is a projection at acceptance L: the drafter's compute, memory and kernels are real, its
acceptance is chosen. ``measure`` places a real drafter's acceptance on the map: it boots the drafter
without a profile, runs a short load and reads L from /metrics.

    # the map: lengths bisected in [1.2, k+1] (or --lengths 1.5,2,2.5,3 for fixed ones)
    python3 -m benchmarks.breakeven_h200 map --model /tmp/model --drafter /tmp/eagle3 --method eagle3 \\
        --k 3 --levels 1,4,16,64,256 --pairs 3 --tuned-flags "--max-num-seqs 256 --max-model-len 4096" \\
        --out $OUT/breakeven-eagle3-k3 [--park sleep] [--max-boots 6]
    # a real drafter's acceptance (trained weights), added to the folder's summary
    python3 -m benchmarks.breakeven_h200 measure --model M --drafter D --method eagle3 --k 3 \\
        --tuned-flags "..." --out $OUT/breakeven-eagle3-k3
    # the map from a nova study that searched acceptance: {lengths: {low, high}} with confirm
    python3 -m benchmarks.breakeven_h200 study --storage URL --study NAME --out DIR
    # the table, plot and k schedule from one or more folders (several k: the best k per level)
    python3 -m benchmarks.breakeven_h200 summarize $OUT/breakeven-eagle3-k3 $OUT/breakeven-eagle3-k5 --at 2.6

Each ``map`` folder gets rows.jsonl (one ``GainRow`` per length and level), windows.jsonl (every window),
servers.jsonl (boots, /metrics acceptance), then ``summarize`` writes summary.json, breakeven.md and
breakeven.html.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from nova_search.analysis.breakeven import (
    GainRow,
    acceptance_length,
    break_even,
    gain_row,
    k_schedule,
    next_length,
)

PORTS = {"T": 8000, "D": 8001}
SERVED = "model"


def _url(name: str) -> str:
    return f"http://127.0.0.1:{PORTS[name]}"


def _get(name: str, path: str, timeout: float = 10.0) -> str:
    with urllib.request.urlopen(_url(name) + path, timeout=timeout) as r:
        return r.read().decode()


def _post(name: str, path: str) -> None:
    req = urllib.request.Request(_url(name) + path, data=b"", method="POST")
    with urllib.request.urlopen(req, timeout=600) as r:
        r.read()


def _healthy(name: str) -> bool:
    try:
        _get(name, "/health", 5)
        return True
    except OSError:
        return False


def _counters(name: str) -> tuple[float, float]:
    """vLLM's accepted-token and draft counters (summed over labels)."""
    text = _get(name, "/metrics")

    def total(metric: str) -> float:
        return sum(float(m.group(1)) for m in re.finditer(rf"^{metric}(?:{{[^}}]*}})? (\S+)$", text, re.M))

    return total("vllm:spec_decode_num_accepted_tokens_total"), total("vllm:spec_decode_num_drafts_total")


class Server:
    def __init__(self, name: str, args: argparse.Namespace, spec: dict | None, log: Path) -> None:
        self.name = name
        argv = [
            *shlex.split(args.serve_cmd), args.model,
            "--served-model-name", SERVED, "--load-format", args.load_format,
            "--gpu-memory-utilization", str(args.mem), "--host", "127.0.0.1", "--port", str(PORTS[name]),
            *shlex.split(args.tuned_flags),
        ]  # fmt: skip
        if spec is not None:
            argv += ["--speculative-config", json.dumps(spec, separators=(",", ":"))]
            argv += shlex.split(args.drafter_flags)
        env = dict(os.environ)
        if args.park == "sleep":
            argv.append("--enable-sleep-mode")
            env["VLLM_SERVER_DEV_MODE"] = "1"
        self.argv = argv
        self.awake = True
        self.log = log
        with open(log, "w") as f:
            self.proc = subprocess.Popen(
                argv, stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        t0 = time.monotonic()
        while not _healthy(name):
            if self.proc.poll() is not None or time.monotonic() - t0 > args.boot_timeout_s:
                tail = log.read_text()[-4000:]
                self.stop()
                raise SystemExit(f"{name} did not come up:\n{tail}")
            time.sleep(2)
        self.boot_s = time.monotonic() - t0

    def sleep(self) -> None:
        if self.awake:
            _post(self.name, "/sleep?level=1")
            self.awake = False

    def wake(self) -> None:
        if not self.awake:
            _post(self.name, "/wake_up")
            self.awake = True

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def _window(name: str, c: int, args: argparse.Namespace, seed: int) -> dict:
    argv = [
        sys.executable, "-m", "nova_search", "bench", "--url", _url(name), "--model", SERVED,
        "--concurrency", str(c), "--input-len", str(args.input_len), "--output-len", str(args.output_len),
        "--num-requests", str(max(args.min_requests, args.requests_per_level * c)),
        "--warmup", str(min(c, 8)), "--seed", str(seed), "--format", "json",
    ]  # fmt: skip
    out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=1800).stdout
    (level,) = json.loads(out[out.index("{") :])["levels"]
    return level


def _synthetic(args: argparse.Namespace, length: float | None) -> dict:
    spec: dict = {"method": args.method, "num_speculative_tokens": args.k}
    if args.drafter:
        spec["model"] = args.drafter
    if length is not None:
        spec |= {"rejection_sample_method": "synthetic", "synthetic_acceptance_length": length}
    return spec


def _use(servers: dict[str, Server], name: str, args: argparse.Namespace) -> None:
    if args.park == "sleep":
        for other, s in servers.items():
            if other != name:
                s.sleep()
        servers[name].wake()


def _append(path: Path, row: dict) -> None:
    with open(path, "a") as f:
        f.write(json.dumps(row) + "\n")


def _rows(out: Path) -> list[GainRow]:
    p = out / "rows.jsonl"
    return [GainRow(**json.loads(x)) for x in p.read_text().splitlines()] if p.exists() else []


def map_cmd(args: argparse.Namespace) -> None:
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    levels = [int(x) for x in args.levels.split(",")]
    low, high = args.low, args.high if args.high is not None else float(args.k + 1)
    fixed = [float(x) for x in args.lengths.split(",")] if args.lengths else []
    (out / "run.json").write_text(json.dumps({k: str(v) for k, v in vars(args).items()}, indent=1))
    servers: dict[str, Server] = {"T": Server("T", args, None, out / "server-T.log")}
    _append(out / "servers.jsonl", {"server": "T", "boot_s": servers["T"].boot_s, "argv": servers["T"].argv})
    boots = 0
    try:
        while boots < args.max_boots:
            rows = _rows(out)
            if fixed:
                todo = [x for x in fixed if not any(abs(r.length - x) < 1e-9 for r in rows)]
                if not todo:
                    break
                length, open_levels = todo[0], levels
            else:
                wanted = {
                    c: next_length(
                        [r for r in rows if r.concurrency == c], low, high, tolerance=args.tolerance
                    )
                    for c in levels
                }
                open_levels = [c for c, x in wanted.items() if x is not None]
                if not open_levels:
                    break
                length = min(x for x in wanted.values() if x is not None)  # the lowest asked first
                # a level whose next probe differs is still measured at this length: it narrows its bracket
            _use(servers, "T", args)
            if args.park == "sleep":
                servers["T"].sleep()
            servers["D"] = Server("D", args, _synthetic(args, length), out / f"server-D-L{length:g}.log")
            boots += 1
            a0, d0 = _counters("D")
            windows: dict[int, tuple[list[float], list[float]]] = {c: ([], []) for c in open_levels}
            for pair in range(args.pairs):
                order = ("T", "D") if pair % 2 == 0 else ("D", "T")  # ABBA (trial.confirm.leader_first)
                for name in order:
                    _use(servers, name, args)
                    for c in open_levels if pair % 2 == 0 else list(reversed(open_levels)):
                        lv = _window(name, c, args, seed=pair)
                        windows[c][0 if name == "T" else 1].append(lv["output_throughput"])
                        _append(out / "windows.jsonl", {"length": length, "pair": pair, "server": name, **lv})
            a1, d1 = _counters("D")
            reported = acceptance_length(a1 - a0, d1 - d0)
            _append(
                out / "servers.jsonl",
                {
                    "server": "D",
                    "length": length,
                    "boot_s": servers["D"].boot_s,
                    "reported_length": reported,
                    "argv": servers["D"].argv,
                },
            )
            servers.pop("D").stop()
            for c, (t, d) in windows.items():
                row = gain_row(args.method, args.k, c, length, t, d, source=f"L{length:g}")
                _append(out / "rows.jsonl", row.as_dict())
                print(
                    f"L={length:g} c={c}: {row.diff_pct:+.1f} % [{row.ci_low}, {row.ci_high}] "
                    f"{row.verdict}; vLLM reported L={reported}",
                    flush=True,
                )
    finally:
        for s in servers.values():
            s.stop()
    summarize([out], None, out)


def measure_cmd(args: argparse.Namespace) -> None:
    """A real drafter's acceptance from /metrics over a short load (no synthetic profile)."""
    args.out.mkdir(parents=True, exist_ok=True)
    s = Server("D", args, _synthetic(args, None), args.out / "server-measure.log")
    try:
        a0, d0 = _counters("D")
        for c in [int(x) for x in args.levels.split(",")]:
            _window("D", c, args, seed=0)
        a1, d1 = _counters("D")
    finally:
        s.stop()
    length = acceptance_length(a1 - a0, d1 - d0)
    row = {"method": args.method, "k": args.k, "length": length, "drafter": args.drafter}
    (args.out / "measured.json").write_text(json.dumps(row, indent=1) + "\n")
    print(json.dumps(row))


def study_cmd(args: argparse.Namespace) -> None:
    """The map from a nova study whose drafter searched ``acceptance: {lengths: {low, high}}`` (with
    ``confirm``: each trial paired with the resident tuned leader): its rows, then ``summarize``."""
    from nova_search.results.load import load_results
    from nova_search.results.speculation import breakeven_rows

    args.out.mkdir(parents=True, exist_ok=True)
    rows = breakeven_rows(load_results(args.study, args.storage))
    (args.out / "rows.jsonl").write_text("".join(json.dumps(r.as_dict()) + "\n" for r in rows))
    summarize([args.out], args.at, given=args.measured)


def summarize(
    folders: list[Path], at: float | None, out: Path | None = None, given: list[str] | None = None
) -> dict:
    from nova_search.report.breakeven_map import breakeven_figure, breakeven_markdown

    rows = [r for f in folders for r in _rows(f)]
    measured = []
    for text in given or ():  # METHOD:K:L, e.g. a study's spec_mean_acceptance_length of a real drafter
        method, k, length = text.split(":")
        measured.append((method, int(k), float(length)))
    for f in folders:
        p = f / "measured.json"
        if p.exists() and (m := json.loads(p.read_text()))["length"] is not None:
            measured.append((m["method"], int(m["k"]), float(m["length"])))
    points = break_even(rows)
    length = at if at is not None else (measured[0][2] if measured else None)
    schedule, choice = k_schedule(rows, length) if length is not None else ((), ())
    summary = {
        "projected": "every gain is a projection at the synthetic acceptance length given",
        "rows": [r.as_dict() for r in rows],
        "break_even": [{**p.__dict__, "text": p.text()} for p in points],
        "measured": [{"method": m, "k": k, "length": x} for m, k, x in measured],
        "k_schedule": {
            "at_length": length,
            "num_speculative_tokens_per_batch_size": [list(x) for x in schedule],
            "per_level": [list(x) for x in choice],
        },
    }
    out = out or folders[0]
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    (out / "breakeven.md").write_text(breakeven_markdown(points, measured, schedule or None, length))
    breakeven_figure(points, measured).write_html(out / "breakeven.html", include_plotlyjs="cdn")
    print((out / "breakeven.md").read_text())
    return summary


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python3 -m benchmarks.breakeven_h200", description=__doc__.split("\n")[0]
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("map", "measure"):
        s = sub.add_parser(name)
        s.add_argument("--model", required=True)
        s.add_argument("--drafter", default=None, help="the drafter's folder (none for ngram)")
        s.add_argument("--method", required=True)
        s.add_argument("--k", type=int, required=True)
        s.add_argument("--levels", default="1,4,16,64,256")
        s.add_argument("--tuned-flags", default="", help="the tuned stack's vLLM flags, one string")
        s.add_argument(
            "--drafter-flags",
            default="",
            help="flags only the drafter server gets (--attention-backend TRITON_ATTN)",
        )
        s.add_argument("--load-format", default="dummy")
        s.add_argument(
            "--serve-cmd",
            default=f"{sys.executable} -m vllm.entrypoints.cli.main serve",
            help="what boots a server (the model and flags follow); the stand-in engine for a dry run",
        )
        s.add_argument("--mem", type=float, default=0.42, help="--gpu-memory-utilization of each server")
        s.add_argument("--park", choices=("keep", "sleep"), default="keep")
        s.add_argument("--input-len", type=int, default=512)
        s.add_argument("--output-len", type=int, default=256)
        s.add_argument(
            "--requests-per-level", type=int, default=4, help="requests a window = this x concurrency"
        )
        s.add_argument("--min-requests", type=int, default=8)
        s.add_argument("--boot-timeout-s", type=float, default=900)
        s.add_argument("--out", type=Path, required=True)
        if name == "map":
            s.add_argument("--pairs", type=int, default=3)
            s.add_argument("--lengths", default=None, help="fixed lengths instead of the bisection")
            s.add_argument("--low", type=float, default=1.2)
            s.add_argument("--high", type=float, default=None, help="default k + 1")
            s.add_argument("--tolerance", type=float, default=0.25)
            s.add_argument("--max-boots", type=int, default=6)
    s = sub.add_parser("study", help="the map from a nova study that searched acceptance lengths")
    s.add_argument("--storage", required=True)
    s.add_argument("--study", required=True)
    s.add_argument("--out", type=Path, required=True)
    s.add_argument("--at", type=float, default=None)
    s.add_argument("--measured", action="append", help="METHOD:K:L, a real drafter's acceptance to place")
    s = sub.add_parser("summarize")
    s.add_argument("folders", type=Path, nargs="+")
    s.add_argument("--at", type=float, default=None, help="acceptance length of the k schedule")
    s.add_argument("--measured", action="append", help="METHOD:K:L, a real drafter's acceptance to place")
    args = p.parse_args(argv)
    if args.cmd == "map":
        map_cmd(args)
    elif args.cmd == "measure":
        measure_cmd(args)
    elif args.cmd == "study":
        study_cmd(args)
    else:
        summarize(args.folders, args.at, given=args.measured)


if __name__ == "__main__":
    main()
