"""The study as optuna-dashboard shows it, one module per concept:

- ``notes``: the markdown notes, one per trial and one for the study (pure, from ``results`` records);
- ``graphs``: the plotly graphs of the study page (pure);
- ``publish``: writing them into the study through optuna-dashboard's API, by one elected worker at a
  time; ``publish.after_trial`` and ``publish.after_stage`` are the worker's ``on_trial_done`` and
  ``on_stage_done`` (the CLI wires them), ``publish.rewrite_notes`` is ``nova-search notes``;
- ``serve``: ``nova-search dashboard``: optuna-dashboard's app with Optuna 5's constraints shown and its
  Analytics contour kept drawable (a patch of its browser script).
"""
