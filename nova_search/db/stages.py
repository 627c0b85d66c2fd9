"""The Optuna studies of one nova study. An unstaged study is one Optuna study (stage ``joint``); a
staged one (``stages: [tune, speculative]``) is one Optuna study per stage, ``NAME.tune`` and
``NAME.speculative``, linked by ``schema.STAGE`` and ``schema.PARENT``. Users name the study ``NAME``
everywhere; ``stage_plan`` finds its parts. It only reads, so workers and readers share it."""

from __future__ import annotations

from optuna.storages import RDBStorage

from nova_search.db import mask, storage_errors, study_names
from nova_search.errors import StudyError
from nova_search.schema import PARENT, SPEC, stage_of

#: the stagings a spec may ask for, in order
STAGE_ORDER = ("joint", "tune", "speculative")


def stage_study_name(name: str, stage: str) -> str:
    """The Optuna study of one stage: the name itself for a joint study, ``NAME.STAGE`` otherwise."""
    return name if stage == "joint" else f"{name}.{stage}"


def stage_plan(storage: RDBStorage, url: str, study_name: str) -> list[tuple[str, str]]:
    """[(stage, Optuna study name)] of a study as users name it: a joint study, or one stage by its
    own name, is itself; a staged study by its name gives its stages' studies in order, those that
    exist and those still to come. Raises StudyError when there is no such study."""
    names = study_names(storage, url)
    with storage_errors(url, "read the studies in"):
        if study_name in names:
            attrs = storage.get_study_user_attrs(storage.get_study_id_from_name(study_name))
            return [(stage_of(attrs), study_name)]
        parts = {}
        for n in names:
            if n.startswith(study_name + "."):
                attrs = storage.get_study_user_attrs(storage.get_study_id_from_name(n))
                if PARENT.read(attrs) == study_name:
                    parts[stage_of(attrs)] = attrs
    if not parts:
        shown = ", ".join(sorted(names)[:10]) or "none"
        raise StudyError(f"no study named {study_name!r} in {mask(url)} (studies there: {shown})")
    first = parts[min(parts, key=STAGE_ORDER.index)]
    planned = (SPEC.read(first) or {}).get("stages")
    stages = (
        [str(s) for s in planned]
        if isinstance(planned, list) and planned
        else sorted(parts, key=STAGE_ORDER.index)
    )
    return [(st, stage_study_name(study_name, st)) for st in stages]
