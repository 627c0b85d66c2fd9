"""The engine stage: EngineConfig -> argv (``command``), the server's lifecycle (``server``), and reads
of its HTTP surface (``probe``). nova-search never imports vLLM; it launches it."""

from nova_search.knobs import EngineConfig, SpeculativeConfig

__all__ = ["EngineConfig", "SpeculativeConfig"]
