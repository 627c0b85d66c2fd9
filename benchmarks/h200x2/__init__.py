"""The two-GPU study (issue 12) on a pair of H200s: its run script, its summary, a storage probe."""
