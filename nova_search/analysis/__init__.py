"""Reading measurements: run-to-run noise (``noise``), where a sweep saturates (``saturation``), and
whether a speculative config reproduces its base's greedy outputs (``equivalence``)."""

from nova_search.analysis.equivalence import Equivalence, compare_outputs
from nova_search.analysis.noise import Comparison, Interval, compare, median_ci
from nova_search.analysis.saturation import Saturation, find_saturation

__all__ = [
    "Comparison",
    "Equivalence",
    "Interval",
    "Saturation",
    "compare",
    "compare_outputs",
    "find_saturation",
    "median_ci",
]
