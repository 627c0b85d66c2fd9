"""Test helpers, shared by the test modules (which never import each other):

builders   LevelResult / TrialResult / StudyResults for pure code
cli        one runner of the real ``nova-search`` command line (a subprocess)
dashboard  a running ``nova-search dashboard``
net        a TCP link that can be cut
trained    what the committed trained-pair studies' tests share
fleet      the fleet simulation (benchmarks/fleet_scale.py, run as a script) at a small N and what every
           run of it must hold
scripts    the benchmark scripts some tests check, run by path (``benchmark_script``)

What the benchmarks share with the tests (stand-in servers and engines, the real CPU engine, PostgreSQL,
spec dicts, worker processes, the cross-check against vLLM's benchmark, the fault table) is in
``nova_search.testing``; the tests import no module of ``benchmarks``.
"""

from pathlib import Path

#: the repository root
REPO = Path(__file__).resolve().parents[2]
