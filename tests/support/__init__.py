"""Test helpers, shared by the test modules (which never import each other):

builders   LevelResult / TrialResult / StudyResults for pure code
cli        one runner of the real ``nova-search`` command line (a subprocess)
specs      spec dicts: the stand-in engine's, the tiny CPU model's
workers    worker processes, the stand-in engines they leave, waiting for a condition
standin    a stand-in OpenAI-style streaming server; fake_engine launches it like vLLM
engine     one real vLLM (CPU) shared by the tests that only read from it
pg         fresh PostgreSQL databases, a throwaway server; net: a TCP link that can be cut
"""

from pathlib import Path

#: the repository root
REPO = Path(__file__).resolve().parents[2]
