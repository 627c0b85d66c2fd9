"""A budget that counts measurements, and output that survives logs (issue 39, items 3 to 5), on the
stand-in engine: a configuration the compatibility table refuses before launch does not use up the
budget (``--n-trials 2`` measures two configurations); ``--log-format json`` gives one event per line
(trial started, level measured, trial ended); off a terminal nothing is wrapped or cut."""

from __future__ import annotations

import json

import optuna
import yaml

from nova_search import schema
from nova_search.testing.specs import minimal_spec_dict
from tests.support.cli import nova, nova_ok
from tests.support.contract import validate

REFUSAL = (
    "chunked_prefill_budget: without chunked prefill, max_num_batched_tokens (256) must be >= "
    "max_model_len (2048); vLLM refuses to start"
)


def _spec(tmp_path, name: str) -> str:
    raw = minimal_spec_dict(
        name=name,
        # half the draws turn chunked prefill off with a batch below max_model_len: refused before launch
        engine={**minimal_spec_dict()["engine"], "defaults": {"max_model_len": 2048}},
        space={
            "enable_chunked_prefill": {"choices": [True, False]},
            "max_num_batched_tokens": {"choices": [256]},
            "max_num_seqs": {"choices": [4, 8, 16, 32]},
        },
        sweep={"concurrency": [1, 2], "requests": 4, "warmup_requests": 1},
        workload={"input_len": 16, "output_len": 16},
        sampler={"name": "random", "seed": 1},
        baselines=[],
    )
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def _refused(t: optuna.trial.FrozenTrial) -> bool:
    return t.state == optuna.trial.TrialState.PRUNED and t.user_attrs.get(schema.REASON.key) == "incompatible"


def test_refused_configurations_do_not_use_up_the_budget_and_events_are_json(tmp_path):
    url = f"sqlite:///{tmp_path}/s.db"
    spec = _spec(tmp_path, "refused")
    r = nova(
        "run", spec, "--storage", url, "--n-trials", "2", "--artifacts-dir", str(tmp_path / "art"),
        "--log-format", "json", timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    trials = optuna.load_study(study_name="refused", storage=url).get_trials()
    measured = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE]
    refused = [t for t in trials if _refused(t)]
    assert len(measured) == 2, [(t.number, t.state, t.user_attrs.get(schema.REASON.key)) for t in trials]
    assert refused, "the sampler drew no refused configuration: pick another seed"
    assert len(trials) == len(measured) + len(refused)

    # stdout holds the events only, one JSON object per line
    events = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
    assert {e["schema_version"] for e in events} == {1}
    for e in events:  # each line against the shipped events.schema.json, formats checked (issue 53)
        validate(e, "events")
    kinds = [e["event"] for e in events]
    assert kinds.count("trial_started") == len(trials) and kinds.count("trial_ended") == len(trials)
    assert kinds.count("level_measured") == 2 * len(measured)  # two levels each
    assert kinds[-1] == "worker_exited"
    started = next(e for e in events if e["event"] == "trial_started" and e["number"] == refused[0].number)
    assert started["params"]["enable_chunked_prefill"] is False and started["worker"]["pid"] > 0
    ended = {e["number"]: e for e in events if e["event"] == "trial_ended"}
    assert ended[refused[0].number]["state"] == "PRUNED" and ended[refused[0].number]["launched"] is False
    assert ended[refused[0].number]["reason"] == "incompatible"
    assert ended[measured[0].number]["values"] == list(measured[0].values)
    level = next(e for e in events if e["event"] == "level_measured")
    assert level["level"] == 1 and level["values"]["completed"] == 4
    assert "trials of refused" in r.stderr  # the tables went to stderr

    # status: the budget counts the two measured trials; the worker is named by host and pid
    status = nova_ok("status", "refused", "--storage", url)
    assert "budget 2, used 2 (" in status and "refused before launch, not counted" in status, status
    pid = measured[0].user_attrs[schema.WORKER.key]["pid"]
    assert f"pid {pid}" in status, status


def test_off_a_terminal_nothing_is_wrapped_or_cut(tmp_path):
    """stdout is a pipe here, as in a log file: the refusal (over 80 columns) is one whole line, and the
    final tables print each configuration whole."""
    url = f"sqlite:///{tmp_path}/s.db"
    r = nova("run", _spec(tmp_path, "logs"), "--storage", url, "--n-trials", "2", timeout=600,
             env={"COLUMNS": "80"})  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert any(REFUSAL in line for line in r.stdout.splitlines()), r.stdout
    assert "…" not in r.stdout
    assert "  max_num_batched_tokens: 256" in r.stdout.splitlines()
    assert "A new study created" not in r.stdout + r.stderr
