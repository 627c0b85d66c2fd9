"""Test helpers, shared by the test modules (which never import each other):

builders   LevelResult / TrialResult / StudyResults for pure code
cli        one runner of the real ``nova-search`` command line (a subprocess)
specs      spec dicts: the stand-in engine's, the tiny CPU model's
workers    worker processes, the stand-in engines they leave, waiting for a condition
standin    a stand-in OpenAI-style streaming server; fake_engine launches it like vLLM
engine     one real vLLM (CPU) shared by the tests that only read from it
pg         fresh PostgreSQL databases, a throwaway server; net: a TCP link that can be cut

``script`` loads one of the repository's scripts (benchmarks/...) as a module.
"""

import importlib.util
from pathlib import Path
from types import ModuleType

#: the repository root
REPO = Path(__file__).resolve().parents[2]


def script(relative: str) -> ModuleType:
    """The script at ``relative`` (from the repository root) as a module, run once per call."""
    path = REPO / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec and spec.loader, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
