"""Local models for an offline machine: the tiny random-weight one (``tiny``) and a target and drafters
trained here (``trained``; torch runs in the engine's interpreter)."""
