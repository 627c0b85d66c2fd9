"""The sampler's evaluation set (issue 55): many tables, not one, each a response surface a study could
meet, split once into a training half (the sampler's settings are tuned on it) and a held-out half
(reported, never tuned on); ``python -m benchmarks.sampler_replay eval`` (or ``-m benchmarks.sampler_eval
run``) replays every sampler on every table and writes one table of results, and ``eval --grid`` does
the same for a measured grid outside the set.

- ``tables``: what a table is (a space, a direction, a figure per configuration) and the measured ones:
  the CPU grids of ``benchmarks/results/sampler-replay-cpu`` (c=32), ``sampler-replay-cpu-levels``
  (c=4 and c=16) and ``sampler-replay-cpu-prefill`` (c=8 and c=32; the last two measured after the
  tuning: held out) under each of their objectives, any grid given with ``--grid``, and the
  recorded GPU studies' trials as partial tables (``benchmarks/results/*/study.db``);
- ``synthetic``: seeded response surfaces shaped like serving (plateaus, a KV-cache cliff, unbootable
  corners, batch limits against drafters, noise between passes);
- ``split.json``: which table is training and which held out, chosen by a seeded draw before any tuning;
- ``replay``: one sampler on one table for one seed, as a worker draws (``search.configs.sample``);
- ``samplers``: nova's sampler (``search.sampler.make_sampler``), the variants tuned, and the
  baselines (random, random without repeats, Optuna's default TPE);
- ``__main__``: the commands (``run``, ``tune``, ``split``).
"""
