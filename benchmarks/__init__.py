"""The benchmarks: studies of nova-search's own measurement, search and coordination, and of vLLM on the
H200, each a module run from the repository root (``python -m benchmarks.<name>``); benchmarks/README.md
lists them by purpose, with their commands and where their results are.

What they share with the tests is ``nova_search.testing`` (stand-in servers and engines, the
cross-check against vLLM's own benchmark client, PostgreSQL databases, spec builders): the tests import
no module of this package."""
