"""Test helpers, shared by the test modules (which never import each other):

builders   LevelResult / TrialResult / StudyResults for pure code
cli        one runner of the real ``nova-search`` command line (a subprocess)
dashboard  a running ``nova-search dashboard``
net        a TCP link that can be cut
trained    what the committed trained-pair studies' tests share
fleet      the fleet simulation at a small N and what every run of it must hold

What the benchmarks share with the tests (stand-in servers and engines, the real CPU engine, PostgreSQL,
spec dicts, worker processes, the cross-check against vLLM's benchmark) is in ``benchmarks.harness``.
"""

from pathlib import Path

#: the repository root
REPO = Path(__file__).resolve().parents[2]
