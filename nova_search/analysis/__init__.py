"""Reading measurements: run-to-run noise (``noise``) and where a sweep saturates (``saturation``)."""

from nova_search.analysis.noise import Comparison, Interval, compare, median_ci
from nova_search.analysis.saturation import Saturation, find_saturation

__all__ = ["Comparison", "Interval", "Saturation", "compare", "find_saturation", "median_ci"]
