"""The markdown notes optuna-dashboard shows: one per trial, one for the study.

Pure (from ``results`` records, tested without storage):

- ``trial_note_markdown(trial)``: the per-level profile as a table (concurrency, output tok/s,
  TTFT/TPOT p50 and p99, ITL and E2E p99, errors, KV peak, acceptance when a drafter ran), the launch
  argv in a code block, the failure reason when there is one. It lists the trial's constraints by
  name and says INFEASIBLE when one fails (optuna-dashboard 0.21 reads no Optuna 5 constraint:
  ``serve.show_named_constraints``).
- ``study_note_markdown(results, policy_markdown=None)``: what to deploy, trials by state, stock vs
  the tuned baseline per concurrency, the best trials (the Pareto front), and, when given, a policy
  section (``verdict_note_markdown``: the speculative verdict, when the study has speculative trials).

Writing them is ``publish``'s.
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import Sequence
from typing import Any

from nova_search.measure.objectives import Objective
from nova_search.report.data import throughput_table
from nova_search.report.markdown import table as md_table
from nova_search.results.capacity_table import capacity_rows
from nova_search.results.cost import gpu_time
from nova_search.results.select import best_trials, objective_of, stock_trial, tuned_baseline
from nova_search.results.trials import StudyResults, TrialResult

log = logging.getLogger("nova_search")

#: rows of the study note's best-trials table
BEST_ROWS = 10
#: failure messages are cut to this many characters in a note (the whole log is an artifact)
MESSAGE_CHARS = 1500
#: the end of the server log shown in a failed trial's note
LOG_TAIL_CHARS = 1500


# ---------------------------------------------------------------- formatting


def _cell(v: Any, fmt: str = ".4g") -> str:
    """A markdown table cell: None as a dash, floats formatted, pipes escaped."""
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int | float):
        return format(float(v), fmt)
    return str(v).replace("|", "\\|").replace("\n", " ")


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{v:.0%}"


def _fence(text: str, lang: str = "") -> str:
    """A fenced code block that the text cannot close early."""
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}{lang}\n{text}\n{fence}"


def _config_label(trial: TrialResult) -> str:
    return trial.config.label() if trial.config else ("vLLM defaults" if trial.is_stock else "")


# ---------------------------------------------------------------- trial note


def trial_note_markdown(trial: TrialResult, objectives: Sequence[Objective] = ()) -> str:
    """The note of one trial: what ran, the per-level profile, how it was launched, why it ended.

    ``objectives`` name the values of a COMPLETE trial."""
    parts = [f"## Trial {trial.key}: {trial.state} ({trial.role})"]
    facts = [f"**configuration:** {_cell(_config_label(trial)) or '–'}"]
    if trial.projected:
        facts.insert(
            0,
            f"**{trial.projected}:** the drafter ran with synthetic acceptance; every figure of this trial "
            "is a projection at that acceptance, not a measurement of the drafter",
        )
    if trial.values is not None and objectives:
        shown = ", ".join(
            f"{o.name} = {_cell(v)}" for o in objectives if (v := objective_of(trial, o)) is not None
        )
        facts.append(
            f"**objectives:** {shown}" + ("" if trial.feasible else " (infeasible: a constraint fails)")
        )
    if trial.engine_version:
        facts.append(f"**engine:** vLLM {_cell(trial.engine_version)}")
    if trial.timing:
        facts.append(
            "**timing:** " + ", ".join(f"{k.removesuffix('_s')} {v:.1f} s" for k, v in trial.timing.items())
        )
    if trial.client_bound_levels:
        facts.append(
            "**client-bound:** the load generator may have set the figures at concurrency "
            + ", ".join(map(str, trial.client_bound_levels))
            + " (see Warnings)"
        )
    parts.append("  \n".join(facts))
    if trial.reason or trial.state in ("FAIL", "PRUNED"):
        message = (trial.message or "").strip()
        if len(message) > MESSAGE_CHARS:
            message = message[:MESSAGE_CHARS] + " …"
        parts.append(f"### Why it ended {trial.state}\n\n**{_cell(trial.reason or 'unknown')}**")
        if message:
            parts.append(_fence(message))
        if trial.log_tail and trial.log_tail.strip():
            log_tail = trial.log_tail.strip()
            if len(log_tail) > LOG_TAIL_CHARS:
                log_tail = "… " + log_tail[-LOG_TAIL_CHARS:]
            parts.append(
                "The end of the server log (all of it: the trial's `server.log` artifact):\n\n"
                + _fence(log_tail)
            )
    if trial.levels:
        spec = trial.speculative
        headers = [
            "concurrency",
            "output tok/s",
            "TTFT p50 ms",
            "TTFT p99 ms",
            "TPOT p50 ms",
            "TPOT p99 ms",
            "ITL p99 ms",
            "E2E p99 ms",
            "errors",
            "KV peak",
        ] + (["acceptance"] if spec else [])
        rows = []
        for lv in sorted(trial.levels, key=lambda lv: lv.concurrency):
            row = [
                str(lv.concurrency),
                _cell(lv.output_throughput, ".1f"),
                _cell(lv.ttft_p50_ms, ".1f"),
                _cell(lv.ttft_p99_ms, ".1f"),
                _cell(lv.tpot_p50_ms, ".2f"),
                _cell(lv.tpot_p99_ms, ".2f"),
                _cell(lv.itl_p99_ms, ".2f"),
                _cell(lv.e2e_p99_ms, ".1f"),
                f"{lv.errors}/{lv.requests}",
                _pct(lv.kv_cache_usage_peak),
            ]
            if spec:
                row.append(_pct(lv.spec_acceptance_rate))
            rows.append(row)
        parts.append("### Profile per concurrency\n\n" + md_table(headers, rows))
    elif trial.state != "PRUNED":
        parts.append("No level was measured.")
    if trial.capacity is not None:
        parts.append(_capacity_trial_markdown(trial))
    if trial.constraints:
        parts.append(_constraints_markdown(trial))
    if trial.warnings:
        parts.append("### Warnings\n\n" + "\n".join(f"- {_cell(w)}" for w in trial.warnings))
    if trial.argv:
        parts.append("### Launch command\n\n" + _fence(shlex.join(trial.argv), "bash"))
    return "\n\n".join(parts) + "\n"


def _capacity_trial_markdown(trial: TrialResult) -> str:
    """The capacity search of a trial: what it found, cost and energy, then each probe."""
    c = trial.capacity
    assert c is not None
    lines = [f"### Capacity at the SLO\n\n**{_cell(c.text())}**"]
    if c.status == "found":
        cost = c.cost_per_mtok
        energy = c.joules_per_token
        lines.append(
            f"cost: {_cell(cost, '.4g') + ' $/Mtok' if cost is not None else _cell(c.cost_note)} · "
            f"energy: {_cell(energy, '.4g') + ' J/token' if energy is not None else _cell(c.energy_note)}"
        )
    rows = [
        [
            c.load_text(p.load),
            p.verdict + (" (abandoned)" if p.abandoned else ""),
            f"{p.counts.met}/{p.counts.planned or p.counts.measured}",
            f"[{p.judgement.low:.3f}, {p.judgement.high:.3f}]",
            _cell(p.request_throughput, ".3g"),
            _cell(p.energy_j, ".4g"),
        ]
        for p in c.probes
    ]
    headers = ["load", "verdict", "met every bound", "attainment interval", "req/s", "energy J"]
    lines.append(md_table(headers, rows, text=("load", "verdict")))
    return "\n\n".join(lines)


def _capacity_study_markdown(results: StudyResults) -> str | None:
    """Capacity at the SLO: stock, tuned, best, each drafter's best (``results.capacity_table``)."""
    rows = capacity_rows(results)
    if not rows:
        return None
    table = [
        [
            c.which,
            c.trial,
            c.status,
            _cell(c.capacity_rps_per_gpu, ".4g"),
            _cell(c.cost_per_mtok, ".4g"),
            _cell(c.joules_per_token, ".4g"),
        ]
        for c in rows
    ]
    headers = ["which", "trial", "status", "req/s per GPU", "$ per Mtok", "J per token"]
    return f"## Capacity at {rows[0].slo}\n\n" + md_table(headers, table, text=("which", "status"))


def _constraints_markdown(trial: TrialResult) -> str:
    """Each constraint by its name with its value (Optuna's convention: it holds when <= 0); the
    heading says INFEASIBLE when one fails, so the note says it whatever the dashboard's table shows."""
    broken = [k for k, v in trial.constraints.items() if v > 0.0]
    rows = [[k, _cell(v), "yes" if v <= 0.0 else "**no**"] for k, v in trial.constraints.items()]
    head = "### Constraints: " + (f"INFEASIBLE ({len(broken)} broken)" if broken else "all hold")
    return (
        head
        + "\n\n"
        + md_table(["constraint", "value (holds when <= 0)", "holds"], rows, text=("constraint",))
    )


# ---------------------------------------------------------------- study note


def study_note_markdown(results: StudyResults, policy_markdown: str | None = None) -> str:
    """The study note: where the study stands, stock vs the best tuned trial per concurrency, the best
    trials, and ``policy_markdown`` (a deployment policy, say) as its own section when given."""
    states: dict[str, int] = {}
    for t in results.trials:
        states[t.state] = states.get(t.state, 0) + 1
    budget = f" · budget {results.budget_used}/{results.budget}" if results.budget else ""
    objectives = ", ".join(f"`{o.name}` ({o.direction})" for o in results.objectives) or "none"
    cost = gpu_time(results)
    parts = [
        f"# {results.study_name}",
        _deploy_markdown(results),  # the note opens with what to deploy (results.deploy)
        f"{len(results.trials)} trials: "
        + (", ".join(f"{n} {s}" for s, n in sorted(states.items())) or "none yet")
        + budget
        + f"  \n**objectives:** {objectives}  \n**{cost.text()}**"
        + (f"  \n{held}" if (held := cost.held_text()) is not None else ""),
    ]

    stock, tuned = stock_trial(results), tuned_baseline(results)
    section = ["## Stock vs tuned"]
    if stock is None and tuned is None:
        section.append("No COMPLETE stock baseline and no feasible tuned trial yet.")
    else:
        who = []
        if stock is not None:
            who.append(f"stock: trial {stock.key}")
        else:
            any_stock = results.stock()
            who.append(
                "stock: none"
                if any_stock is None
                else f"stock: trial {any_stock.key} ended {any_stock.state}"
            )
        who.append(
            f"tuned: trial {tuned.key} ({_cell(_config_label(tuned))})"
            if tuned is not None
            else "tuned: no feasible non-speculative trial yet"
        )
        section.append(" · ".join(who))
        rows = []
        for r in throughput_table(stock, tuned):
            s = stock.level(r.concurrency) if stock else None
            t = tuned.level(r.concurrency) if tuned else None
            rows.append(
                [
                    str(r.concurrency),
                    _cell(r.stock_tok_s, ".1f"),
                    _cell(r.tuned_tok_s, ".1f"),
                    "–" if r.delta_pct is None else f"{r.delta_pct:+.1f}%",
                    _cell(s.ttft_p99_ms if s else None, ".1f"),
                    _cell(t.ttft_p99_ms if t else None, ".1f"),
                    _cell(s.tpot_p99_ms if s else None, ".2f"),
                    _cell(t.tpot_p99_ms if t else None, ".2f"),
                ]
            )
        if rows:
            section.append(
                md_table(
                    [
                        "concurrency",
                        "stock tok/s",
                        "tuned tok/s",
                        "vs stock",
                        "stock TTFT p99 ms",
                        "tuned TTFT p99 ms",
                        "stock TPOT p99 ms",
                        "tuned TPOT p99 ms",
                    ],
                    rows,
                )
            )
    parts.append("\n\n".join(section))

    front = best_trials(results)
    section = ["## Best trials (Pareto front, feasible)"]
    if front:
        names = [o.name for o in results.objectives]
        rows = [
            [
                t.key,
                t.role,
                *(_cell(objective_of(t, o)) for o in results.objectives),
                _cell(_config_label(t)) + (" (client-bound)" if t.client_bound_levels else ""),
            ]
            for t in front[:BEST_ROWS]
        ]
        section.append(
            md_table(["trial", "role", *names, "configuration"], rows, text=("role", "configuration"))
        )
        if len(front) > BEST_ROWS:
            section.append(f"… and {len(front) - BEST_ROWS} more on the front (`nova-search best`).")
    else:
        section.append("No feasible COMPLETE trial yet.")
    parts.append("\n\n".join(section))

    if (capacity := _capacity_study_markdown(results)) is not None:
        parts.append(capacity)
    if policy_markdown and policy_markdown.strip():
        parts.append(policy_markdown.strip())
    parts.append(
        "_Written by nova-search after each trial; edits made here are overwritten. Each trial's note holds "
        "its profile and launch command; its request records and server log are its artifacts._"
    )
    return "\n\n".join(parts) + "\n"


def _deploy_markdown(results: StudyResults) -> str:
    """The deploy answer, the study note's first section (the one ``policy`` prints); never raises."""
    from nova_search.report.policy import answer_markdown
    from nova_search.results.deploy import deploy_answer

    try:
        return answer_markdown(deploy_answer(results)).strip()
    except Exception as e:  # noqa: BLE001 - the note goes out without it, never fails
        log.warning("no deploy answer in the study note: %s: %s", type(e).__name__, e)
        return f"## What to deploy\n\nNot computed: {type(e).__name__}: {e}"


def verdict_note_markdown(results: StudyResults) -> str | None:
    """The verdict and policy for the study note (its ``policy_markdown``), when the study has
    speculative trials."""
    from nova_search.report.policy import verdict_markdown
    from nova_search.results.speculation import verdict_of

    if not any(t.speculative for t in results.complete()):
        return None
    try:
        return verdict_markdown(verdict_of(results))
    except Exception as e:  # noqa: BLE001 - the note goes out without the verdict, never fails
        log.warning("no verdict in the study note: %s: %s", type(e).__name__, e)
        return None
