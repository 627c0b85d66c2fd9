"""vLLM's dynamic speculation schedule for a deployment policy (``verdict.build_policy``): when the
policy's speculative ranges differ only in ``num_speculative_tokens``, one server with
``num_speculative_tokens_per_batch_size`` replaces switching configurations."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from nova_search.engine.config import EngineConfig


def without_k(config: EngineConfig) -> EngineConfig:
    """The configuration with its drafter's k (and schedule) left out: what configurations that
    differ only in k have in common."""
    spec = config.speculative
    if spec is None:
        return config
    return config.with_values(
        speculative=replace(spec, num_speculative_tokens=0, num_speculative_tokens_per_batch_size=None)
    )


def dynamic_schedule(
    policy: Sequence[Any], profiles: Mapping[str, Any]
) -> tuple[tuple[tuple[int, int, int], ...] | None, str]:
    """vLLM's ``num_speculative_tokens_per_batch_size`` for the policy (``verdict.PolicyRange``s, over
    ``verdict.Profile``s by trial key), when its speculative ranges differ only in k. Tuned ranges
    become k = 0 (drafting off) when tuned is the same configuration without speculation; otherwise
    no schedule (switching configurations is the policy)."""
    spec = [r for r in policy if r.choice == "speculative"]
    if not spec:
        return None, "no speculative range: no schedule"
    bases = {without_k(profiles[r.trial].config) for r in spec}
    if len(bases) > 1:
        return None, "the speculative ranges differ in more than num_speculative_tokens: deploy per range"
    if len({r.num_speculative_tokens for r in spec}) == 1 and len(spec) == len(policy):
        return None, "one k everywhere: the static configuration is the schedule"
    base_plain = profiles[spec[0].trial].config.with_values(speculative=None)
    tuned_plain = next(
        (profiles[r.trial].config.with_values(speculative=None) for r in policy if r.choice == "tuned"), None
    )
    if tuned_plain is not None and tuned_plain != base_plain:
        return None, (
            "tuned differs from the speculative configurations in more than drafting (e.g. batch "
            "limits): deploy per range"
        )
    last = max((profiles[r.trial].config.max_num_seqs or 0 for r in spec), default=0)
    rows = []
    for r in policy:
        hi = r.max_concurrency if r.max_concurrency is not None else max(last, r.min_concurrency, 1024)
        rows.append((r.min_concurrency, hi, int(r.num_speculative_tokens or 0)))
    return tuple(rows), (
        "one server: the speculative configuration with this schedule in --speculative-config; "
        "k = 0 turns drafting off in the tuned ranges"
    )
