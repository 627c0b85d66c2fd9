"""The study spec: one YAML file, merged with ``--set`` overrides, then validated once.

Precedence, lowest first: field defaults < the spec file < environment (``NOVA_ENGINE_PYTHON``,
``NOVA_STORAGE``) < explicit flags (``--set``, ``--storage``, ``--study-name``, ``--n-trials``).

Every model forbids unknown keys, and every error names the dotted path of the field that is wrong
(``space.max_num_seqs.range.low: ...``), so a user can fix the file without reading code.
"""

from nova_search.spec._base import (
    DRAFTER_METHODS,
    SPEC_METHODS,
    BoolChoices,
    FloatChoices,
    FloatRange,
    IntChoices,
    IntRange,
    StrChoices,
    StrictModel,
    parse_cores,
)
from nova_search.spec.model_engine import SECRET_NAME, EngineDefaults, EngineSpec, ModelSpec
from nova_search.spec.reader import (
    apply_overrides,
    format_validation_error,
    load_spec,
    parse_spec,
    redacted_spec,
)
from nova_search.spec.service_level import BoundSpec, CapacitySpec, SLOSpec
from nova_search.spec.space import SpaceSpec, SpeculativeSpace
from nova_search.spec.study import (
    STAGINGS,
    BudgetSpec,
    ConstraintSpec,
    ObjectiveSpec,
    SamplerSpec,
    StudySpec,
    check_study_name,
    study_name_problem,
)
from nova_search.spec.workload import (
    SPEED_KEY,
    ArrivalSpec,
    ClosedArrival,
    LenRange,
    NormalLen,
    PoissonArrival,
    SweepSpec,
    TraceArrival,
    WorkloadSpec,
    level_name,
    speed_key,
)

__all__ = [
    "DRAFTER_METHODS",
    "SECRET_NAME",
    "SPEC_METHODS",
    "SPEED_KEY",
    "STAGINGS",
    "ArrivalSpec",
    "BoolChoices",
    "BoundSpec",
    "BudgetSpec",
    "CapacitySpec",
    "ClosedArrival",
    "ConstraintSpec",
    "EngineDefaults",
    "EngineSpec",
    "FloatChoices",
    "FloatRange",
    "IntChoices",
    "IntRange",
    "LenRange",
    "ModelSpec",
    "NormalLen",
    "ObjectiveSpec",
    "PoissonArrival",
    "SLOSpec",
    "SamplerSpec",
    "SpaceSpec",
    "SpeculativeSpace",
    "StrChoices",
    "StrictModel",
    "StudySpec",
    "SweepSpec",
    "TraceArrival",
    "WorkloadSpec",
    "apply_overrides",
    "check_study_name",
    "format_validation_error",
    "level_name",
    "load_spec",
    "parse_cores",
    "parse_spec",
    "redacted_spec",
    "speed_key",
    "study_name_problem",
]
