"""The search space: the knob table's knobs, each fixed, a list of choices or a range, and the drafter.
A knob left out is not passed to vLLM (its default, or engine.defaults)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    Discriminator,
    Field,
    Tag,
    create_model,
    model_validator,
)

from nova_search.knobs import SPACE_KNOBS, Knob
from nova_search.spec._base import (
    DRAFTER_METHODS,
    SPEC_METHODS,
    BoolParam,
    FloatParam,
    IntParam,
    StrChoices,
    StrictModel,
    StrParam,
    param_values,
)
from nova_search.spec.acceptance import AcceptanceProfile

#: the keys of a parameter written as a mapping ({low, high}, {choices}); any other mapping of
#: num_speculative_tokens is one k per drafter method
_PARAM_KEYS = frozenset({"low", "high", "step", "log", "choices"})


def _k_kind(value: Any) -> str:
    """``num_speculative_tokens``: one parameter for every drafter, or a mapping method -> parameter."""
    if isinstance(value, dict) and value and not set(value) & _PARAM_KEYS:
        return "per_drafter"
    return "shared"


#: tokens drafted per step: one parameter shared by every drafter, or one per drafter method
KParam = Annotated[
    Annotated[IntParam, Tag("shared")] | Annotated[dict[str, IntParam], Tag("per_drafter")],
    Discriminator(_k_kind),
]


class SpeculativeSpace(StrictModel):
    """The drafter search. ``num_speculative_tokens`` is sampled only when the method is not none."""

    #: the drafter: none, ngram, eagle, eagle3, dflash, draft_model, mtp, suffix (a value or {choices})
    method: StrParam = "none"
    #: tokens drafted per step (sampled only when the method is not none): one parameter for every
    #: drafter (3, {low, high}, {choices}), or one per drafter method ({eagle3: 3, dflash: 15}), each
    #: fixed, listed or a range
    num_speculative_tokens: KParam | None = None
    #: n-gram: the shortest prompt n-gram to look up
    prompt_lookup_min: IntParam | None = None
    #: n-gram: the longest prompt n-gram to look up (>= prompt_lookup_min)
    prompt_lookup_max: IntParam | None = None
    #: drafter checkpoint (path or hub id) per method that needs one
    drafters: dict[str, str] = Field(default_factory=dict)
    #: synthetic acceptance per method (spec/acceptance.py): {length}, {rates} or {lengths: {low, high}};
    #: the drafter runs for real, acceptance follows the profile: its figures are projections
    acceptance: dict[str, AcceptanceProfile] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> SpeculativeSpace:
        methods = self.methods()
        for m in methods:
            if m not in SPEC_METHODS:
                raise ValueError(f"method {m!r} is not one of {', '.join(SPEC_METHODS)}")
        for m in self.drafters:
            if m not in DRAFTER_METHODS:
                raise ValueError(f"drafters.{m}: only {', '.join(DRAFTER_METHODS)} take a drafter model")
        for m in methods:
            if m in DRAFTER_METHODS and m not in self.drafters:
                raise ValueError(
                    f"drafters.{m} is required because method includes {m!r} (a drafter model path or hub id)"
                )
        drafting = [m for m in methods if m != "none"]
        if drafting and self.num_speculative_tokens is None:
            raise ValueError("num_speculative_tokens is required when a method other than none is listed")
        if isinstance(self.num_speculative_tokens, dict):
            for m in self.num_speculative_tokens:
                if m not in drafting:
                    raise ValueError(
                        f"num_speculative_tokens.{m}: not a drafter method this space lists "
                        f"({', '.join(drafting) or 'none'}); give one k per listed drafter"
                    )
            for m in drafting:
                if m not in self.num_speculative_tokens:
                    raise ValueError(
                        f"num_speculative_tokens.{m} is required: method lists {m!r} and "
                        "num_speculative_tokens gives one k per drafter"
                    )
        for m in drafting:
            p = self.k_param(m)
            where_k = (
                f"num_speculative_tokens.{m}"
                if isinstance(self.num_speculative_tokens, dict)
                else ("num_speculative_tokens")
            )
            for where, value in param_values(p) if p is not None else ():
                if not isinstance(value, int) or not 1 <= value <= 64:
                    raise ValueError(
                        f"{where_k}{'.' + where if where else ''}: must be 1..64 (got {value!r}): "
                        f"the tokens {m} drafts a step"
                    )
        for m, profile in self.acceptance.items():
            if m == "none" or m not in methods:
                raise ValueError(
                    f"acceptance.{m}: not a drafter method this space lists ({', '.join(methods)})"
                )
            ks = [v for _, v in param_values(self.k_param(m))]
            problem = profile.k_problem([k for k in ks if isinstance(k, int)])
            if problem:
                raise ValueError(f"acceptance.{m}.{problem}")
        for name, low, high in (
            ("prompt_lookup_min", 1, 64),
            ("prompt_lookup_max", 1, 64),
        ):
            p = getattr(self, name)
            for where, value in param_values(p) if p is not None else ():
                if not isinstance(value, int) or not low <= value <= high:
                    raise ValueError(
                        f"{name}{'.' + where if where else ''}: must be {low}..{high} (got {value!r})"
                    )
        return self

    def k_param(self, method: str) -> Any:
        """The k parameter of ``method``: its own where the space gives one per drafter, else the shared
        one (None for none, or a method without one)."""
        k = self.num_speculative_tokens
        return k.get(method) if isinstance(k, dict) else k

    def k_param_name(self, method: str) -> str:
        """The Optuna parameter a drafter's k is drawn as: ``num_speculative_tokens``, or per drafter
        ``num_speculative_tokens_<method>`` (each drafter's own distribution, never mixed in one)."""
        per = isinstance(self.num_speculative_tokens, dict)
        return f"num_speculative_tokens_{method}" if per else "num_speculative_tokens"

    def methods(self) -> list[str]:
        return list(self.method.choices) if isinstance(self.method, StrChoices) else [self.method]


#: how a spec writes a knob of each type: fixed, {choices: [...]}, or (numbers) {low:, high:}
_PARAM_OF: dict[type, Any] = {int: IntParam, float: FloatParam, str: StrParam, bool: BoolParam}


def _knob_field(k: Knob, annotation: Any) -> tuple[Any, Any]:
    return (annotation | None, Field(default=None, description=k.help))


class _KnobSpace(StrictModel):
    """Checks every value a knob can take against the knob table's bounds (``Knob.check``)."""

    @model_validator(mode="after")
    def _bounds(self) -> Any:
        for name, k in SPACE_KNOBS.items():
            p = getattr(self, name)
            if p is None:
                continue
            for where, value in param_values(p):
                problem = k.check(value)
                if problem:
                    raise ValueError(f"{name}{'.' + where if where else ''}: {problem}")
        return self


#: One joint search space. A knob left out is not passed to vLLM (its default, or engine.defaults).
#: Its fields are the knob table's (``knobs.KNOBS``), each searched or fixed, plus the drafter.
SpaceSpec = create_model(  # type: ignore[call-overload]
    "SpaceSpec",
    __base__=_KnobSpace,
    __doc__="One joint search space: the knob table's knobs (fixed, choices or a range) and the drafter.",
    **{name: _knob_field(k, _PARAM_OF[k.type]) for name, k in SPACE_KNOBS.items()},
    speculative=(
        SpeculativeSpace,
        Field(
            default_factory=SpeculativeSpace, description="the drafter search (method none: no speculation)"
        ),
    ),
)
