"""The search: a trial's parameters -> EngineConfig (``configs``), the compatibility table
(``rules``, pure) over the facts of the host and model (``host``, the only I/O here), nova's sampler
around Optuna's (``sampler``), and a study's life in storage: create, load, the next stage
(``lifecycle``)."""
