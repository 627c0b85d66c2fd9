"""Projections: figures from a trial whose drafter ran with synthetic acceptance
(``space.speculative.acceptance``). The drafter's compute, memory and kernels were real; its acceptance
followed a chosen profile, so every figure is a projection at that acceptance, never a measurement of
that drafter. One definition of the label, used by every reader (verdict, policy, report, dump, status,
deploy answer, export)."""

from __future__ import annotations

from collections.abc import Iterable

from nova_search.knobs import EngineConfig, SpeculativeConfig


def acceptance_length(config: EngineConfig | SpeculativeConfig | None) -> float | None:
    """The mean acceptance length a synthetic profile set (None: the drafter's own acceptance)."""
    spec = config.speculative if isinstance(config, EngineConfig) else config
    return spec.acceptance_length if spec is not None else None


def label(config: EngineConfig | SpeculativeConfig | None) -> str | None:
    """``projected at acceptance L=2.6`` (``(rates 1, 0.6, 0)`` added for a per-position profile), or
    None for a trial whose acceptance was its drafter's own."""
    spec = config.speculative if isinstance(config, EngineConfig) else config
    length = acceptance_length(spec)
    if spec is None or length is None:
        return None
    text = f"projected at acceptance L={length:.3g}"
    if spec.synthetic_acceptance_rates is not None:
        text += " (rates " + ", ".join(f"{r:g}" for r in spec.synthetic_acceptance_rates) + ")"
    return text


def labels(configs: Iterable[EngineConfig | SpeculativeConfig | None]) -> str | None:
    """One label for several trials (a drafter's candidates): their lengths joined, None if none is
    a projection."""
    lengths = sorted({x for c in configs if (x := acceptance_length(c)) is not None})
    if not lengths:
        return None
    if len(lengths) == 1:
        return f"projected at acceptance L={lengths[0]:.3g}"
    return "projected at acceptance L=" + ", ".join(f"{x:.3g}" for x in lengths)


#: the note every output with a projection carries
NOTE = (
    "projected: {what} ran with synthetic acceptance (vLLM's synthetic rejection sampler); the "
    "drafter's cost is real, its acceptance was chosen, so these figures are projections at that "
    "acceptance, not measurements of the drafter: measure its real acceptance before deploying it"
)


def note(what: str) -> str:
    return NOTE.format(what=what)
