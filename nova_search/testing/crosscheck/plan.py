"""What a cross-check runs (``CrossCheckPlan``) and what one run of one client measured (``Figures``),
read from either client's output."""

from __future__ import annotations

from dataclasses import dataclass


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
