"""What every spec model shares: a strict base model (unknown keys refused, no NaN or infinity), the
ways a knob is written (fixed, choices, range), and taskset-style core lists."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)

SPEC_METHODS = ("none", "ngram", "eagle", "eagle3", "dflash", "draft_model", "mtp", "suffix")
#: Methods that need a separate drafter checkpoint (``space.speculative.drafters[method]``).
DRAFTER_METHODS = ("eagle", "eagle3", "dflash", "draft_model")


#: the longest text a spec field may hold, each item of a list or dict alike (an env value, an argument:
#: Linux refuses one string over 128 KiB in execve); a path or a name has its own, shorter bound
MAX_TEXT = 32 * 1024


class StrictModel(BaseModel):
    """Unknown keys refused, values never coerced from another type, NaN and infinities refused, and
    every text bounded: no NUL byte (no argv, environment or file name can hold one, so it would fail
    every trial instead of at ``create``), at most MAX_TEXT characters (checked before any other rule
    reads the text)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)

    @field_validator("*", mode="after")
    @classmethod
    def _bounded_text(cls, v: Any) -> Any:
        problem = text_problem(v)
        if problem is not None:
            raise ValueError(problem)
        return v


def text_problem(v: Any, where: str = "the value") -> str | None:
    """Why the text in ``v`` (a str, or the lists and dicts of str a spec field holds) is refused: a NUL
    byte or more than MAX_TEXT characters, saying where (``item 3``, ``the value of KEY``); None when it
    is fine. Models are checked by their own fields."""
    if isinstance(v, str):
        if "\x00" in v:
            return f"{where} holds a NUL byte (\\x00): no path, name or argument can"
        if len(v) > MAX_TEXT:
            return f"{where} is {len(v)} characters long; at most {MAX_TEXT}"
        return None
    if isinstance(v, list | tuple):
        for i, x in enumerate(v):
            problem = text_problem(x, f"item {i}")
            if problem is not None:
                return problem
    if isinstance(v, dict):
        for k, x in v.items():
            problem = text_problem(k, f"a key ({str(k)[:40]!r})") or text_problem(x, f"the value of {k}")
            if problem is not None:
                return problem
    return None


# ---------------------------------------------------------------- searchable parameters


class IntRange(StrictModel):
    low: int = Field(ge=-(2**31), le=2**31)
    high: int = Field(ge=-(2**31), le=2**31)
    log: bool = False
    step: int = Field(default=1, gt=0, le=2**31)

    @model_validator(mode="after")
    def _check(self) -> IntRange:
        check_range(self.low, self.high, self.log)
        if self.log and self.step != 1:
            raise ValueError(f"a log-scale range takes no step (got step {self.step})")
        return self


class FloatRange(StrictModel):
    low: float
    high: float
    log: bool = False

    @model_validator(mode="after")
    def _check(self) -> FloatRange:
        check_range(self.low, self.high, self.log)
        return self


def check_range(low: float, high: float, log: bool) -> None:
    if low > high:
        raise ValueError(f"low ({low}) must be <= high ({high})")
    if log and low <= 0:
        raise ValueError(f"a log-scale range needs low > 0 (got {low})")


class IntChoices(StrictModel):
    choices: list[int] = Field(min_length=1, max_length=1000)


class FloatChoices(StrictModel):
    choices: list[float] = Field(min_length=1, max_length=1000)


class StrChoices(StrictModel):
    choices: list[str] = Field(min_length=1, max_length=1000)


class BoolChoices(StrictModel):
    choices: list[bool] = Field(min_length=1)


def param_values(p: Any) -> list[tuple[str, Any]]:
    """(where, value) of every value a knob parameter can take: itself when fixed, each choice, or
    the two ends of a range; for checking them against the knob's bounds."""
    if isinstance(p, IntRange | FloatRange):
        return [("low", p.low), ("high", p.high)]
    if isinstance(p, IntChoices | FloatChoices | StrChoices | BoolChoices):
        return [(f"choices.{i}", v) for i, v in enumerate(p.choices)]
    return [("", p)]


def _param_kind(value: Any) -> str:
    """How a parameter is written: a fixed scalar, ``{choices: [...]}`` or ``{low:, high:}``."""
    if isinstance(value, dict):
        return "choices" if "choices" in value else "range"
    if isinstance(value, BaseModel):
        return "choices" if hasattr(value, "choices") else "range"
    return "fixed"


IntParam = Annotated[
    Annotated[int, Tag("fixed")] | Annotated[IntRange, Tag("range")] | Annotated[IntChoices, Tag("choices")],
    Discriminator(_param_kind),
]
FloatParam = Annotated[
    Annotated[float, Tag("fixed")]
    | Annotated[FloatRange, Tag("range")]
    | Annotated[FloatChoices, Tag("choices")],
    Discriminator(_param_kind),
]
StrParam = Annotated[
    Annotated[str, Tag("fixed")] | Annotated[StrChoices, Tag("choices")], Discriminator(_param_kind)
]
BoolParam = Annotated[
    Annotated[bool, Tag("fixed")] | Annotated[BoolChoices, Tag("choices")], Discriminator(_param_kind)
]


#: the highest core id a spec may name (engine.cpus, sweep.client_cpus, bench --cpus). Each worker
#: checks the cores against the ones it may run on as it starts: ``create`` may run on another host
MAX_CORE = 4095


def parse_cores(text: str) -> list[int]:
    """A core list as ``taskset -c`` writes it: numbers and ranges separated by commas (``8-15``,
    ``0,2,4-7``, ``0-15:2`` for every second core). Sorted, without repeats; ValueError on anything
    else (an empty list included, and a core above MAX_CORE)."""
    cores: set[int] = set()
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        m = re.fullmatch(r"([0-9]+)(?:-([0-9]+)(?::([0-9]+))?)?", part)  # ASCII digits: not int("٣")
        if m is None:
            raise ValueError(f"{part!r} is not a core, nor a range of cores like 8-15")
        low = int(m.group(1))
        high = int(m.group(2)) if m.group(2) is not None else low
        step = int(m.group(3)) if m.group(3) is not None else 1
        if high < low or step < 1:
            raise ValueError(f"{part!r}: a range goes from low to high, with a positive step")
        if high > MAX_CORE:  # before the range is made: 0-100000000 would fill the memory
            raise ValueError(f"{part!r}: core {high} is above {MAX_CORE}, the highest core id accepted")
        cores.update(range(low, high + 1, step))
    if not cores:
        raise ValueError(f"{text!r} names no core")
    return sorted(cores)


def as_cores(value: Any) -> Any:
    """``client_cpus`` as YAML gives it: ``8-15``, ``"0,2,4-7"``, ``[8, 9]`` or ``["8-11", 14]``."""
    if isinstance(value, int) and not isinstance(value, bool):
        return [value]
    if isinstance(value, str):
        return parse_cores(value)
    if isinstance(value, list) and any(isinstance(v, str) for v in value):
        return parse_cores(",".join(str(v) for v in value))
    return value
