"""The load generator: prompts (``workload``), one streamed request (``client``), and closed-loop
concurrency levels with the engine sampled during the window (``runner``)."""
