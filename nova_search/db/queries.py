"""Plain SQL over nova's rows joined with Optuna's tables, for people who query storage directly.

Optuna's ``trials.state`` holds the TrialState name (``'COMPLETE'``); on PostgreSQL it is a native
enum, which compares with a string literal as well.
"""

from __future__ import annotations

#: The best configuration at one concurrency level whose TTFT p99 stays under a limit: the highest
#: output throughput among COMPLETE trials of the study. Bound parameters: ``:study`` (study
#: name), ``:concurrency`` (the level), ``:ttft_p99_ms`` (the limit, milliseconds). ``argv`` is the
#: exact engine command line, i.e. the configuration itself.
BEST_AT_CONCURRENCY_SQL = """
SELECT r.trial_id,
       t.number AS trial_number,
       r.concurrency,
       r.output_throughput,
       r.ttft_p99_ms,
       r.tpot_p99_ms,
       r.error_rate,
       r.engine_version,
       r.argv
FROM nova_level_result AS r
JOIN trials AS t ON t.trial_id = r.trial_id
JOIN studies AS s ON s.study_id = t.study_id
WHERE s.study_name = :study
  AND t.state = 'COMPLETE'
  AND r.concurrency = :concurrency
  AND r.ttft_p99_ms < :ttft_p99_ms
  AND r.output_throughput IS NOT NULL
ORDER BY r.output_throughput DESC, r.ttft_p99_ms ASC, t.number ASC
LIMIT 1
"""
