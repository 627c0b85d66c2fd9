"""nova-search: a Bayesian search for the best vLLM serving configuration.

The data flow of one trial (``trial.run`` chains the stages; ``trial.confirm`` measures further windows)::

    StudySpec -> search.configs.sample -> EngineConfig -> engine.command -> engine.server.Server
      -> loadgen (per concurrency level) -> RequestRecords -> measure.metrics.summarize -> LevelResult
      -> measure.objectives -> Optuna values + constraints
"""

__version__ = "0.1.0"
