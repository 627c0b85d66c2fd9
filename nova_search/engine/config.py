"""EngineConfig: every vLLM knob nova-search sets, searched or fixed. None means "not passed"."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any


@dataclass(frozen=True, slots=True)
class SpeculativeConfig:
    method: str
    num_speculative_tokens: int
    model: str | None = None
    prompt_lookup_min: int | None = None
    prompt_lookup_max: int | None = None
    #: vLLM's dynamic schedule: [[min_batch, max_batch, k], ...]
    num_speculative_tokens_per_batch_size: tuple[tuple[int, int, int], ...] | None = None

    def as_json_dict(self) -> dict[str, Any]:
        """The ``--speculative-config`` payload: only the keys that are set."""
        d = {k: v for k, v in asdict(self).items() if v is not None}
        if "num_speculative_tokens_per_batch_size" in d:
            d["num_speculative_tokens_per_batch_size"] = [
                list(x) for x in d["num_speculative_tokens_per_batch_size"]
            ]
        return d


@dataclass(frozen=True, slots=True)
class EngineConfig:
    kv_cache_dtype: str | None = None
    gpu_memory_utilization: float | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    enable_prefix_caching: bool | None = None
    enable_chunked_prefill: bool | None = None
    attention_backend: str | None = None
    max_model_len: int | None = None
    tensor_parallel_size: int | None = None
    speculative: SpeculativeConfig | None = None

    def with_values(self, **changes: Any) -> EngineConfig:
        return replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["speculative"] = self.speculative.as_json_dict() if self.speculative else None
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EngineConfig:
        """The inverse of ``as_dict`` (unknown keys are ignored: a newer worker's record)."""
        known = {f for f in cls.__dataclass_fields__}
        values = {k: v for k, v in d.items() if k in known and k != "speculative"}
        spec = d.get("speculative")
        if spec:
            fields = SpeculativeConfig.__dataclass_fields__
            sd = {k: v for k, v in spec.items() if k in fields}
            sched = sd.get("num_speculative_tokens_per_batch_size")
            if sched is not None:
                sd["num_speculative_tokens_per_batch_size"] = tuple(tuple(x) for x in sched)
            values["speculative"] = SpeculativeConfig(**sd)
        return cls(**values)
