"""The benchmarks: studies of nova-search's own measurement, search and coordination, and of vLLM on the
H200, each a module run from the repository root (``python -m benchmarks.<name>``); benchmarks/README.md
lists them by purpose, with their commands and where their results are.

``benchmarks.harness`` holds what they share with the tests: stand-in servers and engines, the
cross-check against vLLM's own benchmark client, PostgreSQL databases, spec builders."""
