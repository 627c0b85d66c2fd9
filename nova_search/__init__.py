"""nova-search: a Bayesian search for the best vLLM serving configuration.

The data flow of one trial (see ``trial.run``, the only module that chains the stages)::

    StudySpec -> space.sample -> EngineConfig -> engine.command -> engine.Server
      -> loadgen (per concurrency level) -> RequestRecords -> metrics.summarize -> LevelResult
      -> objectives -> Optuna values + constraints
"""

__version__ = "0.1.0"
