"""The two clients compared over a cross-check's pairs, metric by metric (``compare``), and its report."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from nova_search.testing.crosscheck.plan import METRICS
from nova_search.testing.crosscheck.runs import CrossCheck, Pair, describe


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
