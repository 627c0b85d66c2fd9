"""The worker side: the ask/tell loop with its heartbeats and budget lock (``loop``), which trial fits
which of a worker's GPUs (``placement``), and one worker per GPU group of a node (``node``)."""
