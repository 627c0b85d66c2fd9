"""Studies run on one NVIDIA H200, from a copy of the repository root (``python3 -m benchmarks.gpu.<name>``):
the shell scripts that carry a study across device calls, and the summaries of what they recorded."""
