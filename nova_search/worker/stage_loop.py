"""Moving between a study's stages: a worker runs one stage's trials (``loop.run_worker``) and, once
that stage's budget is spent (counted across every worker) and none of its trials runs, opens the next
stage's study on the tuned baseline (``search.lifecycle.next_stage``, created once, under a lock)."""

from __future__ import annotations

import logging
from dataclasses import replace

import optuna

from nova_search import schema
from nova_search.db import open_storage, retrying
from nova_search.db.stages import stage_plan
from nova_search.search.lifecycle import load, next_stage, stage_done
from nova_search.search.placement import NoSlot
from nova_search.worker.loop import WorkerOptions, run_worker

log = logging.getLogger("nova_search")


def run_stages(study_name: str, storage_url: str, opts: WorkerOptions) -> tuple[optuna.Study, int]:
    """Run a study's trials, following its stages: when one stage's budget is spent (counted across
    every worker) and none of its trials runs, the next stage starts on its tuned baseline. Returns
    the last stage's study this worker worked on and the number of trials it ran."""
    storage = open_storage(storage_url, retry_s=opts.storage_retry_s)
    window = opts.storage_retry_s
    plan = retrying(lambda: stage_plan(storage, storage_url, study_name), window, "read the studies in")
    opts = opts.with_deadline()
    study, spec = load(plan[0][1], storage_url, storage)
    parent = schema.PARENT.read(retrying(lambda: study.user_attrs, window, "read the study in")) or study_name
    ran = 0
    for i, (stage, _name) in enumerate(plan):
        if i > 0:
            nxt = retrying(
                lambda st=stage, prev=study: next_stage(parent, st, prev, spec, storage, storage_url),
                window,
                "open the next stage in",
            )
            if nxt is None:
                log.info("stage %s still runs elsewhere: this worker stops here", plan[i - 1][1])
                break
            study = nxt
        left = None if opts.max_trials is None else opts.max_trials - ran
        if left is not None and left <= 0:
            break
        try:
            ran += run_worker(study, spec, replace(opts, max_trials=left))
        except NoSlot as e:
            if i == 0:
                raise
            log.warning("%s: this worker stops here, the others go on", e)
            break
        if not retrying(
            lambda st=stage, s=study: stage_done(s, spec, st), window, "read the stage's trials in"
        ):
            break  # stopped by --max-trials, --stop-after or an interrupt
    return study, ran
