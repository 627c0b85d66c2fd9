"""Seconds the RUNNING trial on a GPU has run (nothing printed when none runs there), for run.sh's
mid-trial SIGKILL. Usage: python3 -m benchmarks.h200x2.running_age STUDY GPU (storage from
NOVA_STORAGE)."""

from __future__ import annotations

import datetime as dt
import os
import sys

import optuna
from optuna.trial import TrialState

from nova_search import schema
from nova_search.db import open_storage


def main() -> None:
    study_name, gpu = sys.argv[1], int(sys.argv[2])
    storage = open_storage(os.environ["NOVA_STORAGE"], read_only=True)
    study = optuna.load_study(study_name=study_name, storage=storage)
    now = dt.datetime.now()
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        where = schema.WORKER.read(t.user_attrs)
        if where is not None and gpu in where.gpus and t.datetime_start is not None:
            print(int((now - t.datetime_start).total_seconds()))
            return


if __name__ == "__main__":
    main()
