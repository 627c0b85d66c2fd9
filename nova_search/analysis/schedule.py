"""A deployment policy's ranges (``PolicyRange``, built by ``verdict.build_policy``) and vLLM's dynamic
speculation schedule for such a policy: when its speculative ranges differ only in
``num_speculative_tokens``, one server with ``num_speculative_tokens_per_batch_size`` replaces
switching configurations. The range lives here, below the verdict, so that the schedule reads it typed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from nova_search.knobs import EngineConfig


@dataclass(frozen=True)
class PolicyRange:
    """A range of the policy as the verdict built it: its configuration and the gain it rests on
    (``policy --format json`` lists these as they are: ``results.serialize.PolicyOutput``)."""

    min_concurrency: int
    #: None: no upper bound
    max_concurrency: int | None
    choice: Literal["tuned", "speculative"]
    trial: str
    study: str
    number: int
    method: str
    num_speculative_tokens: int | None
    argv: tuple[str, ...]
    #: the measured levels this range rests on
    levels: tuple[int, ...]
    #: the range's largest gain against tuned, the level it was measured at, and that level's own
    #: interval (not an envelope over the range's levels: each level has its own, in the verdict)
    gain_pct: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    gain_level: int | None = None
    #: "projected at acceptance L=2.6" when the range's drafter ran with synthetic acceptance
    #: (analysis.projection): a projection, never a measured range of that drafter
    projected: str | None = None


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
    policy: Sequence[PolicyRange], configs: Mapping[str, EngineConfig]
) -> tuple[tuple[tuple[int, int, int], ...] | None, str]:
    """vLLM's ``num_speculative_tokens_per_batch_size`` for the policy (its ranges' trials' configurations
    in ``configs``, by trial key), when its speculative ranges differ only in k. Tuned ranges
    become k = 0 (drafting off) when tuned is the same configuration without speculation; otherwise
    no schedule (switching configurations is the policy)."""
    spec = [r for r in policy if r.choice == "speculative"]
    if not spec:
        return None, "no speculative range: no schedule"
    bases = {without_k(configs[r.trial]) for r in spec}
    if len(bases) > 1:
        return None, "the speculative ranges differ in more than num_speculative_tokens: deploy per range"
    if len({r.num_speculative_tokens for r in spec}) == 1 and len(spec) == len(policy):
        return None, "one k everywhere: the static configuration is the schedule"
    base_plain = configs[spec[0].trial].with_values(speculative=None)
    tuned_plain = next(
        (configs[r.trial].with_values(speculative=None) for r in policy if r.choice == "tuned"), None
    )
    if tuned_plain is not None and tuned_plain != base_plain:
        return None, (
            "tuned differs from the speculative configurations in more than drafting (e.g. batch "
            "limits): deploy per range"
        )
    last = max((configs[r.trial].max_num_seqs or 0 for r in spec), default=0)
    rows = []
    for r in policy:
        hi = r.max_concurrency if r.max_concurrency is not None else max(last, r.min_concurrency, 1024)
        rows.append((r.min_concurrency, hi, int(r.num_speculative_tokens or 0)))
    return tuple(rows), (
        "one server: the speculative configuration with this schedule in --speculative-config; "
        "k = 0 turns drafting off in the tuned ranges"
    )
