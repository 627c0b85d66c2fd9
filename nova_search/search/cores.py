"""The cores this process may run on (its affinity: a container's cpuset, a taskset), against the
cores a spec or an option pins to.

``check_host_cores(spec)`` is what a worker checks when it starts, before it asks a trial: a core that
is not here would fail every trial's pinning and spend the budget on FAILs (``create`` may run on
another host, so there only the spec's bound, ``MAX_CORE``, is checked). ``cores_here(field, cores)``
is the same check for one field or option (``bench --cpus``). Both raise SpecError naming the field.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from nova_search.errors import SpecError
from nova_search.spec import StudySpec


def check_host_cores(spec: StudySpec) -> None:
    """engine.cpus and sweep.client_cpus against the cores this process may run on; and a synthetic
    acceptance profile on an engine that cannot run it (vLLM's CPU build), refused before a server
    boots on it (spec/acceptance.py)."""
    for field, cores in (("engine.cpus", spec.engine.cpus), ("sweep.client_cpus", spec.sweep.client_cpus)):
        cores_here(field, cores)
    from nova_search.spec.acceptance import engine_refusal

    if problem := engine_refusal(spec):
        raise SpecError(problem)


def cores_here(field: str, cores: Sequence[int] | None) -> None:
    """Raise SpecError when one of ``cores`` is not one this process may run on."""
    if not cores or not hasattr(os, "sched_getaffinity"):
        return
    here = sorted(os.sched_getaffinity(0))
    missing = [c for c in cores if c not in here]
    if missing:
        raise SpecError(
            f"{field}: core {missing[0]} is not one this process may run on (cores here: "
            f"{core_list(here)}); pin to cores of this host, or run where they are"
        )


def core_list(cores: list[int]) -> str:
    """Sorted core ids as taskset writes them: 0-3,8."""
    runs: list[list[int]] = []
    for c in cores:
        if runs and c == runs[-1][1] + 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return ",".join(f"{a}-{b}" if b > a else str(a) for a, b in runs)
