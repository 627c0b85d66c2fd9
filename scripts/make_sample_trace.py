"""Write the sample trace nova-search ships (studies/traces/sample-mooncake.jsonl), from a fixed seed.

    python scripts/make_sample_trace.py [OUT]

A Mooncake-format trace (one JSON object a line: ``timestamp`` in ms, ``input_length``,
``output_length``, ``hash_ids`` blocks of 64 tokens) of chat sessions, shaped like production
traffic and small enough for the tiny CPU model (every prompt and its output within 2048 tokens):

- sessions open at a rate that swings by half over ten minutes, with a few bursts at four times it;
- each session talks to one of eight system prompts (2 to 6 blocks each, shared by every session that
  uses it), for one to six turns, each turn a user message after the previous turn's answer;
- a turn's prompt is the system prompt, the conversation so far and its new message: its first
  blocks are the previous turn's full blocks (the same hash ids), the rest new ids, and a last
  partial block its own id, as Mooncake's hashes of 512-token blocks behave;
- lengths are log-normal (user messages median 120 tokens, answers median 40, capped).

Generated, not recorded: it carries no one's data and is the project's, under its licence. The same
seed writes the same bytes (tests/unit/test_trace.py checks the committed file against this script).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np

SEED = 54
BLOCK = 64
SESSIONS = 880
#: sessions opened per second, on average
SESSION_RATE = 0.6
MAX_CONTEXT = 2000  # prompt + output, within the tiny model's max_model_len of 2048
OUT = Path(__file__).resolve().parents[1] / "studies" / "traces" / "sample-mooncake.jsonl"


def _session_starts(rng: np.random.Generator) -> list[float]:
    """Session opening times: a Poisson process whose rate swings by half over ten minutes, with
    bursts of four times the rate (thinning of a process at the highest rate)."""
    bursts = [(float(b), float(b) + 20.0) for b in rng.uniform(60, 1300, size=4)]
    peak = SESSION_RATE * 1.5 * 4
    starts: list[float] = []
    t = 0.0
    while len(starts) < SESSIONS:
        t += float(rng.exponential(1.0 / peak))
        rate = SESSION_RATE * (1 + 0.5 * math.sin(2 * math.pi * t / 600))
        if any(a <= t < b for a, b in bursts):
            rate *= 4
        if rng.uniform() < rate / peak:
            starts.append(t)
    return starts


def _length(rng: np.random.Generator, median: float, sigma: float, low: int, high: int) -> int:
    return int(min(max(round(float(rng.lognormal(math.log(median), sigma))), low), high))


def make(seed: int = SEED) -> list[dict[str, object]]:
    rng = np.random.default_rng(seed)
    next_id = 0

    def fresh(n: int) -> list[int]:
        nonlocal next_id
        ids = list(range(next_id, next_id + n))
        next_id += n
        return ids

    systems = [fresh(int(rng.integers(2, 7))) for _ in range(8)]
    popularity = rng.dirichlet(np.ones(len(systems)) * 0.7)
    rows: list[tuple[float, int, dict[str, object]]] = []
    for start in _session_starts(rng):
        system = systems[int(rng.choice(len(systems), p=popularity))]
        full = list(system)  # the session's full blocks so far: shared by its next turns
        context = len(system) * BLOCK
        t = start
        for _turn in range(int(rng.integers(1, 7))):
            n_in = context + _length(rng, 120, 0.9, 4, 900)
            if n_in >= MAX_CONTEXT - 8:
                break
            n_out = _length(rng, 40, 0.8, 1, min(400, MAX_CONTEXT - n_in))
            n_full = n_in // BLOCK
            full = full[:n_full] + fresh(n_full - len(full[:n_full]))
            hash_ids = full + (fresh(1) if n_in % BLOCK else [])
            row = {"timestamp": int(t * 1000), "input_length": n_in, "output_length": n_out}
            rows.append((t, len(rows), {**row, "hash_ids": hash_ids}))
            context = n_in + n_out
            t += 2.0 + float(rng.exponential(25.0))  # the answer read, the next message typed
    rows.sort(key=lambda r: (r[0], r[1]))
    return [row for _, _, row in rows]


def write(path: Path = OUT) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row, separators=(",", ":")) + "\n" for row in make()))
    return path


if __name__ == "__main__":
    out = write(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
    print(f"wrote {out}")
