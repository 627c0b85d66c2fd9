"""EngineConfig: every vLLM knob nova-search sets, searched or fixed, declared once. None means "not passed".

Each field of ``EngineConfig`` *is* the knob's declaration: its type, its vLLM flag, how it is written
on the command line, its bounds, whether a spec may search it, and whether the speculative stage
searches it again on top of the tuned stack. Everything else derives from ``KNOBS``, read off those
fields:

- the spec's ``search`` and ``engine.defaults`` / ``tuned`` fields (``spec``),
- the sampler's order of parameters (``search.configs.sample``),
- the argv (``engine.command.config_args``),
- the decoding of a stored configuration (``EngineConfig.from_dict``).

A new vLLM knob is one new field here (and, where vLLM refuses a combination, a rule in ``search``).
"""

from __future__ import annotations

import math
from dataclasses import Field, asdict, dataclass, field, fields, replace
from typing import Any, Literal, get_args, get_type_hints

from nova_search import redact

KnobKind = Literal["value", "bool", "json"]


def _knob(
    flag: str,
    help: str,
    *,
    kind: KnobKind = "value",
    gt: float | None = None,
    ge: float | None = None,
    le: float | None = None,
    in_space: bool = True,
    redrawn_by_drafting: bool = False,
) -> Any:
    meta = {
        "flag": flag,
        "help": help,
        "kind": kind,
        "gt": gt,
        "ge": ge,
        "le": le,
        "in_space": in_space,
        "redrawn_by_drafting": redrawn_by_drafting,
    }
    return field(default=None, metadata={"knob": meta})


@dataclass(frozen=True, slots=True)
class SpeculativeConfig:
    method: str
    num_speculative_tokens: int
    model: str | None = None
    prompt_lookup_min: int | None = None
    prompt_lookup_max: int | None = None
    #: vLLM's dynamic schedule: [[min_batch, max_batch, k], ...]
    num_speculative_tokens_per_batch_size: tuple[tuple[int, int, int], ...] | None = None
    #: synthetic acceptance (``space.speculative.acceptance``): "synthetic" with exactly one of a mean
    #: acceptance length or per-position unconditional rates; the drafter runs, acceptance follows these
    rejection_sample_method: str | None = None
    synthetic_acceptance_length: float | None = None
    synthetic_acceptance_rates: tuple[float, ...] | None = None

    @property
    def acceptance_length(self) -> float | None:
        """The mean acceptance length a synthetic profile sets (1 + the sum of the rates); None when
        acceptance is the drafter's own (a measurement, not a projection)."""
        if self.rejection_sample_method != "synthetic":
            return None
        if self.synthetic_acceptance_length is not None:
            return float(self.synthetic_acceptance_length)
        if self.synthetic_acceptance_rates is not None:
            return 1.0 + float(sum(self.synthetic_acceptance_rates))
        return None

    def as_json_dict(self) -> dict[str, Any]:
        """The ``--speculative-config`` payload: only the keys that are set."""
        d = {k: v for k, v in asdict(self).items() if v is not None}
        if "num_speculative_tokens_per_batch_size" in d:
            d["num_speculative_tokens_per_batch_size"] = [
                list(x) for x in d["num_speculative_tokens_per_batch_size"]
            ]
        if "synthetic_acceptance_rates" in d:
            d["synthetic_acceptance_rates"] = list(d["synthetic_acceptance_rates"])
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SpeculativeConfig:
        known = {f.name for f in fields(cls)}
        sd = {k: v for k, v in d.items() if k in known}
        sched = sd.get("num_speculative_tokens_per_batch_size")
        if sched is not None:
            sd["num_speculative_tokens_per_batch_size"] = tuple(tuple(x) for x in sched)
        if sd.get("synthetic_acceptance_rates") is not None:
            sd["synthetic_acceptance_rates"] = tuple(float(x) for x in sd["synthetic_acceptance_rates"])
        return cls(**sd)


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """One server configuration. Field order is the sampler's order and the argv's order."""

    kv_cache_dtype: str | None = _knob("--kv-cache-dtype", "KV-cache precision: auto, fp8, fp8_e4m3, ...")
    gpu_memory_utilization: float | None = _knob(
        "--gpu-memory-utilization",
        "share of the device memory the engine may take (on the CPU build: of host memory)",
        gt=0.0,
        le=1.0,
        redrawn_by_drafting=True,
    )
    max_num_seqs: int | None = _knob(
        "--max-num-seqs", "most sequences in one batch", ge=1, le=65536, redrawn_by_drafting=True
    )
    max_num_batched_tokens: int | None = _knob(
        "--max-num-batched-tokens",
        "most tokens in one scheduler step (also vLLM's compile range)",
        ge=1,
        le=2**22,
        redrawn_by_drafting=True,
    )
    enable_prefix_caching: bool | None = _knob(
        "--enable-prefix-caching", "reuse the KV cache of shared prompt prefixes", kind="bool"
    )
    enable_chunked_prefill: bool | None = _knob(
        "--enable-chunked-prefill", "split long prefills across steps", kind="bool"
    )
    attention_backend: str | None = _knob("--attention-backend", "FLASH_ATTN, FLASHINFER, TRITON_ATTN, ...")
    max_model_len: int | None = _knob("--max-model-len", "context length (prompt + output)", ge=16, le=2**24)
    tensor_parallel_size: int | None = _knob(
        "--tensor-parallel-size",
        "GPUs one server shards the model over (a worker gives it the first this many GPUs of its slot)",
        ge=1,
        le=64,
    )
    max_cudagraph_capture_size: int | None = _knob(
        "--max-cudagraph-capture-size",
        "largest batch (tokens) CUDA graphs are captured for; part of vLLM's compile-cache key "
        "(set from the sweep unless given: engine.cuda_graphs)",
        ge=1,
        le=2**20,
    )
    speculative: SpeculativeConfig | None = _knob(
        "--speculative-config", "the drafter (space.speculative)", kind="json", in_space=False
    )

    def with_values(self, **changes: Any) -> EngineConfig:
        return replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["speculative"] = self.speculative.as_json_dict() if self.speculative else None
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EngineConfig:
        """The inverse of ``as_dict`` (unknown keys are ignored: a newer worker's record)."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in d.items() if k in known and k != "speculative"}
        spec = d.get("speculative")
        if spec:
            values["speculative"] = SpeculativeConfig.from_dict(spec)
        return cls(**values)

    def label(self) -> str:
        """A one-line label of the knobs that are set (``vLLM defaults`` when none is)."""
        parts = [f"{k}={v}" for k, v in self.as_dict().items() if v is not None and k != "speculative"]
        if self.speculative:
            parts.append(f"spec={self.speculative.method}/k{self.speculative.num_speculative_tokens}")
            if self.speculative.acceptance_length is not None:
                parts.append(f"projected_at_acceptance={self.speculative.acceptance_length:g}")
        return " ".join(parts) or "vLLM defaults"

    @property
    def gpus(self) -> int:
        """GPUs one server of this configuration needs."""
        return self.tensor_parallel_size or 1


@dataclass(frozen=True)
class Knob:
    """One vLLM knob, as declared on ``EngineConfig``."""

    name: str
    #: bool, int, float or str: how a spec writes it and how it is sampled (categorical for bool/str)
    type: type
    flag: str
    help: str
    #: "value": ``--flag VALUE``; "bool": ``--flag`` / ``--no-flag``; "json": ``--flag '{...}'``
    kind: KnobKind
    gt: float | None
    ge: float | None
    le: float | None
    #: a spec may search it (``search``) or fix it (``engine.defaults``, ``tuned``)
    in_space: bool
    #: the speculative stage searches it again on top of the tuned stack (it interacts with drafting)
    redrawn_by_drafting: bool

    def check(self, value: Any) -> str | None:
        """Why ``value`` is out of this knob's bounds (None when it is in): a number out of its bounds,
        or a text that could not be one argv word of its own (it would read as a flag, or steer the
        terminal that shows it: a control character, escaped in the message, never quoted raw)."""
        if isinstance(value, str):
            c = redact.control_character(value)
            if c is not None:
                return f"{self.name} holds a control character ({c}): a value is one plain word"
            if value.startswith("-"):
                return f"{self.name} {value[:40]!r} starts with '-': it would read as a flag, not a value"
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        if isinstance(value, float) and not math.isfinite(value):
            return f"{self.name} must be a finite number (got {value!r})"
        for bound, ok, word in (
            (self.gt, lambda b: value > b, ">"),
            (self.ge, lambda b: value >= b, ">="),
            (self.le, lambda b: value <= b, "<="),
        ):
            if bound is not None and not ok(bound):
                return f"{self.name} must be {word} {bound:g} (got {value!r})"
        return None

    @property
    def bounds(self) -> str:
        parts = [
            f"> {self.gt:g}" if self.gt is not None else "",
            f">= {self.ge:g}" if self.ge is not None else "",
        ]
        parts.append(f"<= {self.le:g}" if self.le is not None else "")
        return ", ".join(p for p in parts if p)


def _knobs() -> tuple[Knob, ...]:
    hints = get_type_hints(EngineConfig)
    out = []
    for f in fields(EngineConfig):
        meta = _meta(f)
        base = next(a for a in get_args(hints[f.name]) if a is not type(None))
        out.append(Knob(name=f.name, type=base, **meta))
    return tuple(out)


def _meta(f: Field[Any]) -> dict[str, Any]:
    return dict(f.metadata["knob"])


#: every knob, in EngineConfig's field order
KNOBS: tuple[Knob, ...] = _knobs()
#: the knobs a spec may search or fix, by name
SPACE_KNOBS: dict[str, Knob] = {k.name: k for k in KNOBS if k.in_space}
