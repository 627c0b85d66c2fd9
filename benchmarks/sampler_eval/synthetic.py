"""Synthetic response surfaces shaped like serving, one per seed (``generate(seed)``: the same seed
gives the same table, on any machine: Python's ``random`` seeded with a string).

Each draws a host (the CPU build or a GPU), a concurrency level, a space of short lists as a user
writes one (``max_num_seqs`` always; ``max_num_batched_tokens``, chunked prefill, prefix caching, the
KV-cache dtype, ``gpu_memory_utilization`` and a drafter with its ``num_speculative_tokens``, each
present or not), then a model of one server at that level whose shapes are those measured:

- **plateaus**: a step of ``b`` running sequences drafting ``k`` tokens each costs ``B + b (1 + k)``
  (``B`` the batch where compute starts to bind), so throughput ``~ b E / (B + b (1 + k))`` rises and
  flattens; past the level itself (``max_num_seqs`` > concurrency) nothing changes at all;
- **a KV-cache cliff**: the cache holds so many sequences (more with an fp8 cache, more with more
  ``gpu_memory_utilization``, fewer beside an EAGLE drafter); a server allowed more preempts, and
  throughput drops by a share drawn per table;
- **unbootable corners**: nova's own rules refuse some (chunked prefill off with a token budget below
  ``max_model_len``; an fp8 cache on a CPU without AVX-512), and the table adds boots that fail: no
  memory left for the KV cache at a low ``gpu_memory_utilization``, the largest batch at the highest
  utilisation (CUDA-graph capture out of memory), an EAGLE drafter with an fp8 cache;
- **batch limits against drafters**: a step's token budget holds ``b (1 + k)`` tokens, so a drafter
  with a small ``max_num_batched_tokens`` runs fewer sequences, and its gain ``E`` (expected tokens a
  step at acceptance ``a``) shrinks as the batch grows and verification binds;
- **noise between passes**: two passes, each figure the model's times a log-normal error (its spread
  drawn per table, wider on the CPU), the table's figure their mean.

The objective is output throughput (half the tables), TTFT p99, a cost-like combination (TTFT p99 over
throughput) or throughput under a TTFT p99 SLO (a quantile of the table's own TTFTs).
"""

from __future__ import annotations

import math
import random
from typing import Any

from benchmarks.sampler_eval.tables import Entry, Table, configurations
from nova_search.knobs import EngineConfig
from nova_search.search.rules import Facts, incompatibilities

#: the lists a user writes, by host
POOLS = {
    "cpu": {
        "levels": [1, 4, 8, 16, 32],
        "max_num_seqs": [2, 4, 8, 16, 32, 64],
        "max_num_batched_tokens": [128, 256, 512, 1024, 2048, 4096],
        "max_model_len": [1024, 2048],
        "peak": (300.0, 8000.0),
        "knee": (2.0, 48.0),
        "prefill_tok_per_ms": (2.0, 20.0),
        "noise": (0.03, 0.15),
    },
    "gpu": {
        "levels": [1, 16, 64, 128, 256],
        "max_num_seqs": [16, 32, 64, 128, 256, 512, 1024],
        "max_num_batched_tokens": [1024, 2048, 4096, 8192, 16384, 32768],
        "max_model_len": [2048, 4096, 8192],
        "peak": (3000.0, 30000.0),
        "knee": (32.0, 1024.0),
        "prefill_tok_per_ms": (20.0, 200.0),
        "noise": (0.01, 0.08),
    },
}
OBJECTIVES = (("throughput", 0.5), ("ttft_p99", 0.2), ("cost", 0.15), ("slo", 0.15))


def _run(rng: random.Random, pool: list[Any], lo: int, hi: int) -> list[Any]:
    """A run of consecutive values of ``pool``, ``lo`` to ``hi`` long."""
    n = rng.randint(lo, min(hi, len(pool)))
    start = rng.randint(0, len(pool) - n)
    return pool[start : start + n]


def _space(rng: random.Random, host: str) -> dict[str, Any]:
    p = POOLS[host]
    space: dict[str, Any] = {"max_num_seqs": {"choices": _run(rng, p["max_num_seqs"], 3, 5)}}
    if rng.random() < 0.75:
        space["max_num_batched_tokens"] = {"choices": _run(rng, p["max_num_batched_tokens"], 2, 4)}
    if rng.random() < 0.6:
        space["enable_chunked_prefill"] = {"choices": [True, False]}
    if rng.random() < 0.5:
        space["enable_prefix_caching"] = {"choices": [True, False]}
    if rng.random() < 0.5:
        space["kv_cache_dtype"] = {"choices": ["auto", "fp8"]}
    if host == "gpu" and rng.random() < 0.35:
        space["gpu_memory_utilization"] = {"choices": _run(rng, [0.7, 0.8, 0.85, 0.9, 0.95], 3, 4)}
    if rng.random() < 0.3:
        methods = rng.choice([["none", "ngram"], ["none", "ngram", "eagle3"], ["none", "eagle3"]])
        space["speculative"] = {
            "method": {"choices": methods},
            "num_speculative_tokens": {"choices": _run(rng, [1, 2, 3, 4, 5, 6], 2, 4)},
            "prompt_lookup_min": 2,
            "prompt_lookup_max": 4,
            "drafters": {"eagle3": "synthetic/eagle3"},
        }
    return space


class _Server:
    """One table's model of a server at one level (the module docstring)."""

    def __init__(self, rng: random.Random, host: str, space: dict[str, Any], level: int) -> None:
        p = POOLS[host]
        u = rng.uniform
        self.c = level
        self.peak = u(*p["peak"])
        self.knee = math.exp(u(math.log(p["knee"][0]), math.log(p["knee"][1])))
        self.in_len = rng.choice([64, 128, 256, 512, 1024])
        self.out_len = rng.choice([32, 64, 128, 256])
        self.prefill_rate = u(*p["prefill_tok_per_ms"])  # prompt tokens per ms
        self.prefill_share = u(0.02, 0.3)
        self.chunked_gain = u(-0.04, 0.06)
        self.unchunked_stall = u(0.0, 1.0)
        self.fp8_speed = u(0.93, 1.05)
        self.fp8_room = u(1.7, 2.0)
        shared = rng.random() < 0.5  # a workload with shared prefixes: prefix caching pays
        self.prefix_gain = u(0.03, 0.25) if shared else -u(0.0, 0.03)
        self.weights = u(0.55, 0.78)  # share of the memory the weights and activations take
        seqs = space["max_num_seqs"]["choices"]
        if rng.random() < 0.6:  # the cache runs out inside the space, below the level
            below = [m for m in seqs if m <= level] or seqs[:1]
            self.kv_seqs = rng.choice(below) * u(0.7, 1.3)
        else:
            self.kv_seqs = 4.0 * max(seqs) * max(level, 1)
        self.preempt = u(0.35, 0.8)
        self.tail = u(1.5, 3.0)
        self.accept = {"ngram": u(0.15, 0.75), "eagle3": u(0.45, 0.85)}
        self.draft_cost = {"ngram": u(0.0, 0.02), "eagle3": u(0.03, 0.12)}
        gmu = space.get("gpu_memory_utilization", {}).get("choices")
        # a GPU's corner: the largest batch at the highest utilisation, where that is searched
        self.graph_oom = rng.random() < 0.4 and gmu is not None
        self.eagle_no_fp8 = rng.random() < 0.5
        self.top = (max(seqs), max(gmu) if gmu else None)

    def measure(self, config: EngineConfig) -> tuple[str | None, float, float]:
        """(why it cannot boot, or None; output tok/s; TTFT p99 in ms) of one configuration."""
        spec = config.speculative
        method = spec.method if spec else "none"
        k = spec.num_speculative_tokens if spec else 0
        gmu = config.gpu_memory_utilization or 0.9
        fp8 = (config.kv_cache_dtype or "auto").startswith("fp8")
        mem = (gmu - self.weights) / (0.9 - self.weights)
        cap = self.kv_seqs * mem * (self.fp8_room if fp8 else 1.0) * (0.85 if method == "eagle3" else 1.0)
        if cap < 1:
            return "no memory left for the KV cache at this gpu_memory_utilization", 0.0, 0.0
        if self.graph_oom and (config.max_num_seqs, config.gpu_memory_utilization) == self.top:
            return "CUDA graph capture out of memory (the largest batch at the highest utilisation)", 0.0, 0.0
        if self.eagle_no_fp8 and method == "eagle3" and fp8:
            return "the EAGLE drafter refuses an fp8 KV cache", 0.0, 0.0
        mbt = config.max_num_batched_tokens or 8192
        want = min(self.c, config.max_num_seqs or 256)
        b = max(1, min(want, mbt // (1 + k)))
        preempting = b > cap
        b = min(b, max(1, int(cap)))
        a = self.accept.get(method, 0.0)
        gain = (1 - a ** (k + 1)) / (1 - a) if k else 1.0
        tput = self.peak * b * gain / (self.knee + b * (1 + k)) / (1 + k * self.draft_cost.get(method, 0.0))
        tput /= 1 + self.prefill_share * self.in_len / mbt
        tput *= 1 + (self.chunked_gain if config.enable_chunked_prefill else 0.0)
        tput *= self.fp8_speed if fp8 else 1.0
        tput *= 1 + (self.prefix_gain if config.enable_prefix_caching else 0.0)
        step_ms = 1000.0 * b * gain / tput
        prefill_ms = self.in_len / self.prefill_rate
        if config.enable_prefix_caching and self.prefix_gain > 0:
            prefill_ms *= 1 - 2 * self.prefix_gain
        if config.enable_chunked_prefill:
            chunks = math.ceil(self.in_len / max(mbt - b * (1 + k), 32))
            first = prefill_ms + chunks * step_ms
        else:
            first = prefill_ms * (1 + self.unchunked_stall) + step_ms
        e2e = first + self.out_len * step_ms / gain
        wait = max(0.0, self.c / b - 1) * e2e
        if preempting:
            tput *= self.preempt
            wait += e2e * (1 - self.preempt)
        return None, tput, (first + wait) * self.tail


def generate(seed: int) -> Table:
    """The synthetic table of ``seed``."""
    rng = random.Random(f"nova-synthetic:{seed}")
    host = "cpu" if rng.random() < 0.4 else "gpu"
    p = POOLS[host]
    while True:  # a space of 12 to 600 configurations
        space = _space(rng, host)
        draft = Table("", "", "grid", "", "maximize", space, stage="joint", device=_device(host))
        size = sum(1 for _ in configurations(draft.spec, "joint"))
        if 12 <= size <= 600:
            break
    level = rng.choice(p["levels"])
    max_len = rng.choice(p["max_model_len"])
    server = _Server(rng, host, space, level)
    facts = Facts(
        device="cpu" if host == "cpu" else "cuda",
        cpu_flags=frozenset({"avx512f"}) if rng.random() < 0.5 else frozenset(),
        model_max_len=max_len,
    )
    sigma = rng.uniform(*p["noise"])
    objective = rng.choices([o for o, _ in OBJECTIVES], [w for _, w in OBJECTIVES])[0]
    draft = Table(
        "", "", "grid", "", "maximize", space, stage="joint", device=facts.device, max_model_len=max_len
    )
    # a configuration's (output tok/s, TTFT p99): the mean of its two passes, and each pass's own
    Figures = tuple[float, float]
    measured: list[tuple[dict[str, Any], str | None, Figures, list[Figures]]] = []
    for params, config, _ in configurations(draft.spec, "joint"):
        refused = incompatibilities(config, facts)
        if refused:
            measured.append((params, "; ".join(refused), (0.0, 0.0), []))
            continue
        failed, tput, ttft = server.measure(config)
        passes = [(rng.lognormvariate(0, sigma), rng.lognormvariate(0, 1.5 * sigma)) for _ in range(2)]
        mean = (tput * sum(t for t, _ in passes) / 2, ttft * sum(f for _, f in passes) / 2)
        measured.append((params, failed, mean, [(tput * t, ttft * f) for t, f in passes]))
    ttfts = sorted(mean[1] for _, why, mean, _ in measured if why is None)
    slo = ttfts[int(rng.uniform(0.3, 0.7) * (len(ttfts) - 1))] if ttfts else 0.0

    def figure(tput: float, ttft: float) -> tuple[float, float | None]:
        if objective == "throughput":
            return tput, None
        if objective == "ttft_p99":
            return ttft, None
        if objective == "cost":
            return ttft / tput, None
        return tput, ttft - slo

    entries = []
    for params, why, mean, passes in measured:
        if why is not None:
            entries.append(Entry(params, False, reason=why))
            continue
        value, constraint = figure(*mean)
        entries.append(Entry(params, True, value, constraint, passes=tuple(figure(*p) for p in passes)))
    name = {
        "throughput": "output_throughput",
        "ttft_p99": "ttft_p99_ms",
        "cost": "cost",
        "slo": "slo_throughput",
    }
    return Table(
        name=f"synthetic/{seed:02d}/{name[objective]}@{level}",
        source=f"synthetic/{seed:02d}",
        kind="grid",
        objective=f"{name[objective]}@{level}",
        direction="minimize" if objective in ("ttft_p99", "cost") else "maximize",
        space=space,
        stage="joint",
        entries=tuple(entries),
        device=facts.device,
        max_model_len=max_len,
        note=f"synthetic {host}: {', '.join(k for k in space)}; noise {sigma:.0%} a pass",
        facts=facts,
    )


def _device(host: str) -> str:
    return "cpu" if host == "cpu" else "cuda"
