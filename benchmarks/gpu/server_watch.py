"""The server's own view of each cross-check run: a thread reads vLLM's /metrics once a second for the
whole measurement and keeps, per sample, the gauges (requests running and waiting, KV cache use) and
the sums and counts of vLLM's counters and histograms (``vllm:*_total``, ``*_sum``, ``*_count``, each
summed over its label sets). ``run_stats`` then gives, for one run's wall-clock span, what the server
did: its mean TTFT, inter-token latency, queue, prefill and decode times, tokens per engine step,
generated tokens per second, and how many requests it ran at once. Two clients that load the server
the same way get the same figures here, whatever their own clocks say.

One read a second costs the server about 3 ms of API-server CPU (README, "/metrics"), the same for
both clients.
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.request
from pathlib import Path

_LINE = re.compile(r"^(vllm:[A-Za-z0-9_]+?)(\{[^}]*\})?\s+(\S+)$")
_GAUGES = ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc")
#: histogram means reported per run: vLLM's name without ``vllm:`` -> the key written
_MEANS = {
    "time_to_first_token_seconds": "server_ttft_mean_ms",
    "inter_token_latency_seconds": "server_itl_mean_ms",
    "time_per_output_token_seconds": "server_tpot_mean_ms",
    "e2e_request_latency_seconds": "server_e2e_mean_ms",
    "request_queue_time_seconds": "server_queue_mean_ms",
    "request_prefill_time_seconds": "server_prefill_mean_ms",
    "request_decode_time_seconds": "server_decode_mean_ms",
}


def parse(text: str) -> dict[str, float]:
    """Gauges, and the ``_total``/``_sum``/``_count`` samples, each summed over its label sets."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        name = m.group(1)
        if name in _GAUGES or name.endswith(("_total", "_sum", "_count")):
            try:
                out[name] = out.get(name, 0.0) + float(m.group(3))
            except ValueError:
                continue
    return out


class ServerWatch:
    """Reads ``url``/metrics every ``interval_s`` in a thread; appends every sample to ``log``."""

    def __init__(self, url: str, log: Path, interval_s: float = 1.0, api_key: str | None = None) -> None:
        self.url = url.rstrip("/") + "/metrics"
        self.log = log
        self.interval_s = interval_s
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.samples: list[tuple[float, dict[str, float]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="server-watch", daemon=True)

    def __enter__(self) -> ServerWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        with self.log.open("a") as f:
            due = time.monotonic()
            while not self._stop.is_set():
                try:
                    req = urllib.request.Request(self.url, headers=self.headers)
                    with urllib.request.urlopen(req, timeout=5) as r:
                        values = parse(r.read().decode())
                    t = time.time()
                    self.samples.append((t, values))
                    f.write(json.dumps({"t": t, **values}) + "\n")
                    f.flush()
                except OSError:
                    pass
                due += self.interval_s
                self._stop.wait(max(0.0, due - time.monotonic()))

    def run_stats(self, began: float, ended: float, concurrency: int) -> dict[str, float | None]:
        """What the server did between ``began`` and ``ended`` (wall clock): the first sample at or
        after ``began`` to the last at or before ``ended``."""
        inside = [(t, v) for t, v in self.samples if began <= t <= ended]
        if len(inside) < 2:
            return {}
        (t0, a), (t1, b) = inside[0], inside[-1]

        def delta(name: str) -> float:
            return b.get(name, 0.0) - a.get(name, 0.0)

        out: dict[str, float | None] = {}
        for base, key in _MEANS.items():
            n = delta(f"vllm:{base}_count")
            out[key] = 1000.0 * delta(f"vllm:{base}_sum") / n if n > 0 else None
        # what the server's mean request time holds beyond the engine's queue, prefill and decode: time
        # in the API server (arrival to the engine, output processing); it grows when the API server
        # process, not the GPU, is the bottleneck
        parts = [
            out[k]
            for k in (
                "server_e2e_mean_ms",
                "server_queue_mean_ms",
                "server_prefill_mean_ms",
                "server_decode_mean_ms",
            )
        ]
        out["server_frontend_mean_ms"] = (
            parts[0] - sum(parts[1:]) if all(isinstance(v, float) for v in parts) else None
        )
        steps = delta("vllm:iteration_tokens_total_count")
        tokens = delta("vllm:iteration_tokens_total_sum")
        out["server_tokens_per_step"] = tokens / steps if steps > 0 else None
        out["server_steps_per_s"] = steps / (t1 - t0) if steps > 0 else None
        running = [v.get("vllm:num_requests_running", 0.0) for _, v in inside]
        busy = [r for r in running if r > 0]
        out["server_running_mean"] = sum(busy) / len(busy) if busy else 0.0
        out["server_running_max"] = max(running)
        # how much of the busy time the server ran the full concurrency
        out["server_full_share"] = sum(r >= concurrency for r in busy) / len(busy) if busy else 0.0
        out["server_waiting_max"] = max(v.get("vllm:num_requests_waiting", 0.0) for _, v in inside)
        return out
