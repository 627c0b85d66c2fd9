"""The search: a trial's parameters -> EngineConfig (``configs``), the compatibility table (``rules``,
pure) over the facts of the host and model (``host``; the cores this process may run on: ``cores``; the
only I/O here), nova's sampler around Optuna's (``sampler``; lists of numbers seen in order:
``ordinal``), a study's life in storage: create, load, the next stage (``lifecycle``), and which GPUs a
trial gets on a worker (``placement``: slots, the sizes that fit, the ask that leaves a queued trial too
big for this worker to another)."""
