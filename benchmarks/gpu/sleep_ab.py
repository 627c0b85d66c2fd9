"""Does a server woken from vLLM's sleep mode measure the same as one freshly booted? (issue 14, item 2)

Two servers of one configuration on one H200, both with ``--enable-sleep-mode`` (VLLM_SERVER_DEV_MODE=1
gives the /sleep and /wake_up endpoints), each with 0.42 of the GPU's memory, the Qwen3-8B shape with
dummy weights:

- ``S`` sleeps (level 1: weights backed up in host memory, KV cache dropped) after each of its windows
  and is woken before the next;
- ``F`` was booted and never sleeps.

Windows alternate in ABBA pairs (S F, F S, ...), each of nova's load generator at one shape, so drift
on the machine falls on both sides alike. The summary compares the windows of S with those of F
(``analysis.noise.compare``: the relative difference of the medians, with a bootstrap 95 % interval)
and records how long each sleep and wake took and what the GPU held while S slept.

    python3 -m benchmarks.gpu.sleep_ab serve            # boots S, then F (a device call each, or one)
    python3 -m benchmarks.gpu.sleep_ab measure --pairs 8 --out $OUT/sleep-ab
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

MODEL = "/tmp/model"
SERVERS = {"S": (8000, "0-5"), "F": (8001, "6-11")}
CLIENT_CPUS = "12-15"
FLAGS = [
    "--served-model-name", "qwen3-8b", "--load-format", "dummy", "--max-model-len", "4096",
    "--max-num-seqs", "64", "--max-num-batched-tokens", "8192", "--gpu-memory-utilization", "0.42",
    "--enable-sleep-mode",
]  # fmt: skip


def url(name: str) -> str:
    return f"http://127.0.0.1:{SERVERS[name][0]}"


def post(name: str, path: str, timeout: float = 300.0) -> float:
    t0 = time.monotonic()
    req = urllib.request.Request(url(name) + path, data=b"", method="POST")
    with urllib.request.urlopen(req, timeout=timeout) as r:
        r.read()
    return time.monotonic() - t0


def healthy(name: str) -> bool:
    try:
        with urllib.request.urlopen(url(name) + "/health", timeout=5) as r:
            return r.status == 200
    except OSError:
        return False


def gpu_used_mib() -> int:
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return int(out.split()[0])


def serve(args: argparse.Namespace) -> None:
    if not Path(MODEL).exists():
        shutil.copytree(REPO / ".gpu" / "model", MODEL)
    env = {**os.environ, "VLLM_SERVER_DEV_MODE": "1", "VLLM_CACHE_ROOT": "/tmp/vllm-cache"}
    for name in args.servers:
        if healthy(name):
            print(f"{name}: already up")
            continue
        port, cpus = SERVERS[name]
        argv = ["taskset", "-c", cpus, sys.executable, "-m", "vllm.entrypoints.cli.main", "serve", MODEL,
                *FLAGS, "--host", "127.0.0.1", "--port", str(port)]  # fmt: skip
        log = open(f"/tmp/server-{name}.log", "w")  # noqa: SIM115 - the server outlives this process
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        Path(f"/tmp/server-{name}.pid").write_text(str(proc.pid))
        t0 = time.monotonic()
        while not healthy(name):  # one at a time: vLLM sizes its memory from what is free at boot
            if proc.poll() is not None or time.monotonic() - t0 > args.timeout_s:
                print(Path(f"/tmp/server-{name}.log").read_text()[-4000:])
                raise SystemExit(f"{name} did not come up")
            time.sleep(1)
        print(
            f"{name}: healthy after {time.monotonic() - t0:.0f} s; GPU holds {gpu_used_mib()} MiB", flush=True
        )


def window(name: str, args: argparse.Namespace, seed: int) -> dict:
    argv = [
        sys.executable, "-m", "nova_search", "bench", "--url", url(name), "--model", "qwen3-8b",
        "--concurrency", str(args.concurrency), "--input-len", str(args.input_len),
        "--output-len", str(args.output_len), "--num-requests", str(args.requests),
        "--warmup", str(args.warmup), "--seed", str(seed), "--cpus", CLIENT_CPUS, "--format", "json",
    ]  # fmt: skip
    out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=600).stdout
    (level,) = json.loads(out[out.index("{") :])["levels"]  # one level: LevelResult as a dict
    return {
        "output_tok_s": level["output_throughput"],
        "ttft_p50_ms": level["ttft_p50_ms"],
        "tpot_p50_ms": level["tpot_p50_ms"],
        "completed": level.get("completed"),
    }


def measure(args: argparse.Namespace) -> None:
    from nova_search.analysis.noise import compare

    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    awake_mib = gpu_used_mib()
    first_sleep_s = post("S", "/sleep?level=1")
    asleep_mib = gpu_used_mib()
    print(
        f"first sleep of S: {first_sleep_s:.1f} s; GPU {awake_mib} MiB awake, {asleep_mib} MiB with S asleep"
    )
    t_start = time.monotonic()
    for pair in range(args.pairs):
        if time.monotonic() - t_start > args.budget_s:
            print(f"budget reached after {pair} pairs")
            break
        for name in ("S", "F") if pair % 2 == 0 else ("F", "S"):
            row: dict = {"pair": pair, "server": name}
            if name == "S":
                row["wake_s"] = round(post("S", "/wake_up"), 3)
            row.update(window(name, args, seed=pair))
            if name == "S":
                row["sleep_s"] = round(post("S", "/sleep?level=1"), 3)
            rows.append(row)
            print(json.dumps(row), flush=True)
    (args.out / "windows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    pairs = sorted({r["pair"] for r in rows if sum(x["pair"] == r["pair"] for x in rows) == 2})
    summary: dict = {
        "shape": {
            "input_len": args.input_len,
            "output_len": args.output_len,
            "concurrency": args.concurrency,
            "requests": args.requests,
            "warmup": args.warmup,
        },  # fmt: skip
        "pairs": len(pairs),
        "first_sleep_s": round(first_sleep_s, 2),
        "gpu_mib": {"both_awake": awake_mib, "S_asleep": asleep_mib},
        "wake_s": sorted(r["wake_s"] for r in rows if "wake_s" in r),
        "sleep_s": sorted(r["sleep_s"] for r in rows if "sleep_s" in r),
    }
    for metric, higher in (("output_tok_s", True), ("ttft_p50_ms", False), ("tpot_p50_ms", False)):
        fresh = [r[metric] for r in rows if r["server"] == "F" and r["pair"] in pairs]
        woken = [r[metric] for r in rows if r["server"] == "S" and r["pair"] in pairs]
        c = compare(fresh, woken, higher_is_better=higher)
        summary[metric] = {
            "fresh_median": c.median_a,
            "woken_median": c.median_b,
            "woken_vs_fresh_pct": c.diff_pct,
            "ci95_pct": [c.ci.low, c.ci.high] if c.ci is not None else None,
            "verdict": c.verdict,
        }
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--servers", nargs="+", default=["S", "F"])
    s.add_argument("--timeout-s", type=float, default=500)
    m = sub.add_parser("measure")
    m.add_argument("--pairs", type=int, default=8)
    m.add_argument("--budget-s", type=float, default=420)
    m.add_argument("--concurrency", type=int, default=64)
    m.add_argument("--input-len", type=int, default=512)
    m.add_argument("--output-len", type=int, default=128)
    m.add_argument("--requests", type=int, default=384)
    m.add_argument("--warmup", type=int, default=16)
    m.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    (serve if args.cmd == "serve" else measure)(args)


if __name__ == "__main__":
    main()
