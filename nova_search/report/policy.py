"""The verdict, the deployment policy and the deploy answer as text: rows first (pure, tested), then
markdown (the dashboard's study note) and rich tables (``nova-search policy --format table``) from the
same rows. ``answer_lines`` and ``answer_markdown`` show ``results.deploy.DeployAnswer``, the one
answer to "what do I run?", identically in ``policy``, ``status`` and the study note."""

from __future__ import annotations

import json
import shlex
from typing import Any

from nova_search.analysis.gains import LevelGain
from nova_search.analysis.verdict import STATUS_TEXT, DrafterVerdict, PolicyRange, Verdict
from nova_search.report.markdown import table as md_table
from nova_search.results.deploy import EVIDENCE_TEXT, DeployAnswer, DeployRange


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{v:+.1f} %"


def _gain(g: LevelGain) -> str:
    ci = f" [{g.ci_low:+.1f}, {g.ci_high:+.1f}]" if g.ci_low is not None and g.ci_high is not None else ""
    mark = {"verified_gain": " ✓", "verified_loss": " ✗"}.get(g.verdict, "")
    return f"{g.concurrency}: {_pct(g.diff_pct)}{ci}{mark}"


def _range(r: PolicyRange) -> str:
    hi = "∞" if r.max_concurrency is None else str(r.max_concurrency)
    return f"{r.min_concurrency}–{hi}"


def header_lines(v: Verdict) -> list[str]:
    direction = "higher" if v.higher_is_better else "lower"
    lines = [
        f"Ranked by {v.metric} ({direction} is better); every gain is against the tuned baseline "
        f"(trial {v.tuned or '–'}), with its 95 % interval; ✓ verified, ✗ verified loss.",
    ]
    if v.stock and any(p is not None for _, p in v.tuned_vs_stock):
        lines.append(
            f"Tuned vs stock (trial {v.stock}), reported apart: "
            + ", ".join(f"{c}: {_pct(p)}" for c, p in v.tuned_vs_stock)
        )
    return lines


def drafter_rows(v: Verdict) -> list[list[str]]:
    rows = []
    for d in v.drafters:
        rng = ", ".join(f"{lo}–{hi}" for lo, hi in d.verified_ranges) or "–"
        rows.append(
            [
                _projected(d.method, d.projected),
                STATUS_TEXT[d.status],
                rng,
                "; ".join(_gain(g) for g in d.per_level) or "–",
                d.reason,
            ]
        )
    return rows


def _projected(what: str, projected: str | None) -> str:
    """``eagle3`` or ``eagle3 (projected at acceptance L=2.6)``: a projection says so wherever it shows."""
    return f"{what} ({projected})" if projected else what


def projection_lines(projected: list[str] | tuple[str, ...]) -> list[str]:
    """The warning above every output that rests on synthetic acceptance."""
    if not projected:
        return []
    return [
        f"PROJECTED, not measured: {', '.join(dict.fromkeys(projected))} (synthetic acceptance: the "
        "drafter's cost is real, its acceptance was chosen; the commands here and the export drop the "
        "profile)"
    ]


def tradeoff_rows(d: DrafterVerdict) -> list[list[str]]:
    return [
        [t.metric, str(t.concurrency), f"{t.tuned:.1f}", f"{t.candidate:.1f}", _pct(t.change_pct), t.effect]
        for t in d.tradeoffs
    ]


def policy_rows(v: Verdict) -> list[list[str]]:
    rows = []
    for r in v.policy:
        what = "tuned" if r.choice == "tuned" else f"{r.method} k={r.num_speculative_tokens}"
        what = _projected(what, r.projected)
        ci = f" [{r.ci_low:+.1f}, {r.ci_high:+.1f}]" if r.ci_low is not None and r.ci_high is not None else ""
        # a range of several levels shows its largest gain, with that level's own interval and name
        at = f" at {r.gain_level}" if r.gain_level is not None and len(r.levels) > 1 else ""
        rows.append(
            [
                _range(r),
                what,
                r.trial,
                _pct(r.gain_pct) + ci + at if r.gain_pct is not None else "–",
                shlex.join(r.argv),
            ]
        )
    return rows


DRAFTER_HEADERS = ["drafter", "status", "verified range", "gain vs tuned per concurrency", "why"]
TRADEOFF_HEADERS = ["metric", "concurrency", "tuned", "speculative", "change", "effect"]
POLICY_HEADERS = ["concurrency", "deploy", "trial", "gain vs tuned", "launch"]


def verdict_markdown(v: Verdict) -> str:
    projected = [d.projected for d in v.drafters if d.projected]
    parts = [
        "## Speculative verdict",
        "",
        *[f"**{x}**" for x in projection_lines(projected)],
        *header_lines(v),
        "",
    ]
    if v.drafters:
        parts += [md_table(DRAFTER_HEADERS, drafter_rows(v), text=DRAFTER_HEADERS), ""]
    for d in v.drafters:
        if d.tradeoffs:
            parts += [
                f"Latency tradeoffs of {_projected(d.method, d.projected)} ({STATUS_TEXT[d.status]}):",
                "",
                md_table(TRADEOFF_HEADERS, tradeoff_rows(d), text=TRADEOFF_HEADERS),
                "",
            ]
    parts += ["## Deployment policy", "", md_table(POLICY_HEADERS, policy_rows(v), text=POLICY_HEADERS), ""]
    if v.schedule:
        payload = json.dumps([list(x) for x in v.schedule])
        parts += [
            f"Dynamic schedule (`num_speculative_tokens_per_batch_size` in `--speculative-config`): "
            f"`{payload}` — {v.schedule_note}.",
            "",
        ]
    parts += [f"- {n}" for n in v.notes]
    return "\n".join(parts).rstrip() + "\n"


def verdict_json(v: Verdict, study: str) -> dict[str, Any]:
    """The JSON of ``nova-search policy --format json``: the verdict, with the policy's ranges first."""
    d = v.as_dict()
    return {"study": study, "policy": d.pop("policy"), "schedule": d.pop("schedule"), **d}


# ---------------------------------------------------------------- the deploy answer


def deploy_what(r: DeployRange) -> str:
    """What a range deploys, in words: ``tuned`` or ``ngram k=3``."""
    c = r.configuration
    what = "tuned" if c.choice == "tuned" else f"{c.method} k={c.num_speculative_tokens}"
    return _projected(what, c.projected)


def answer_heading(a: DeployAnswer) -> str:
    """One line: what the answer is ranked by and against what."""
    if a.metric is None:
        return f"study {a.study}: nothing to rank by"
    direction = "higher" if a.higher_is_better else "lower"
    return (
        f"ranked by {a.metric} ({direction} is better), against the tuned baseline (trial {a.tuned or '–'}); "
        f"vLLM {a.vllm_version or 'unknown'} on {a.device or 'an unrecorded device'}, "
        f"nova-search {a.nova_version}"
    )


def answer_rows(a: DeployAnswer) -> list[list[str]]:
    """Per range: concurrency, what, trial, evidence (status: sentence)."""
    return [
        [
            r.label,
            deploy_what(r),
            r.configuration.trial,
            f"{EVIDENCE_TEXT[r.evidence.status]}: {r.evidence.text}",
        ]
        for r in a.ranges
    ]


ANSWER_HEADERS = ["at concurrency", "deploy", "trial", "evidence"]


def export_commands(a: DeployAnswer) -> list[tuple[str, str]]:
    """(what for, the export command): one for the whole policy, or one per range when it switches
    configuration by load."""
    if a.export is None:
        return []
    if a.switches_by_load:
        return [(f"export for {r.label}", r.export.display) for r in a.ranges]
    return [("export", a.export.display)]


def answer_lines(a: DeployAnswer) -> list[str]:
    """The answer as plain text lines (``status`` ends with them; ``policy`` starts with them)."""
    lines = ["What to deploy: " + answer_heading(a), *(f"  {x}" for x in projection_lines(a.projected))]
    if not a.ranges:
        return lines + [f"  nothing yet: {a.reason}"]
    one = one_server_command(a)
    for r, row in zip(a.ranges, answer_rows(a), strict=True):
        lines.append(f"  {row[0]}: {row[1]}, trial {row[2]} ({row[3]})")
        if r.configuration.capacity_text:
            lines.append(f"    {r.configuration.capacity_text}")
        if one is None:
            lines.append(f"    {r.command}")
    if a.schedule:
        lines.append(
            f"  one server, dynamic schedule {json.dumps([list(x) for x in a.schedule])}: {a.schedule_note}"
        )
    if one is not None:
        lines.append(f"    {one}")
    lines += [f"  {what}: {command}" for what, command in export_commands(a)]
    if a.export_needs:
        lines.append(f"  before deploying: {a.export_needs}")
    return lines


def one_server_command(a: DeployAnswer) -> str | None:
    """The command of the one server that carries every range (vLLM's dynamic schedule: each range's
    command is that server's), shown once under the schedule rather than under each range, where a
    reader of "129-inf: tuned" would take the drafter's command for the tuned one; None otherwise."""
    commands = {r.command for r in a.ranges}
    return commands.pop() if a.schedule and len(commands) == 1 else None


def answer_summary(a: DeployAnswer) -> str:
    """The answer in one line, for the end of a run: one configuration's command, or what each load
    range deploys (the commands are in ``policy``), or why there is nothing to deploy yet."""
    if not a.ranges:
        return f"What to deploy: nothing yet ({a.reason})"
    if len(a.ranges) == 1 or not a.switches_by_load:
        r = a.ranges[0]
        sched = " with a dynamic schedule" if a.schedule else ""
        where = "at every load" if r.max_concurrency is None and r.min_concurrency <= 1 else f"at {r.label}"
        return f"What to deploy: trial {r.configuration.trial} ({deploy_what(r)}{sched}) {where}: {r.command}"
    parts = [f"{r.label}: {deploy_what(r)} (trial {r.configuration.trial})" for r in a.ranges]
    return "What to deploy, by load (concurrency): " + "; ".join(parts)


def answer_markdown(a: DeployAnswer) -> str:
    """The answer as the study note's first section."""
    parts = ["## What to deploy", "", answer_heading(a) + ".", ""]
    parts += [f"**{x}**\n" for x in projection_lines(a.projected)]
    if not a.ranges:
        return "\n".join([*parts, f"Nothing yet: {a.reason}", ""])
    parts += [md_table(ANSWER_HEADERS, answer_rows(a), text=ANSWER_HEADERS), ""]
    one = one_server_command(a)
    for r in a.ranges:
        if one is not None and not r.configuration.capacity_text:
            continue
        parts += [f"**{r.label}** ({deploy_what(r)}, trial {r.configuration.trial}):", ""]
        if r.configuration.capacity_text:
            parts += [r.configuration.capacity_text + ".", ""]
        if one is None:
            parts += [_fence(r.command), ""]
    if a.schedule:
        parts += [
            f"One server, dynamic schedule `{json.dumps([list(x) for x in a.schedule])}`: {a.schedule_note}.",
            "",
        ]
    if one is not None:
        parts += [_fence(one), ""]
    parts += [f"- {what}: `{command}`" for what, command in export_commands(a)]
    if a.export_needs:
        parts.append(f"- before deploying: {a.export_needs}")
    return "\n".join(parts).rstrip() + "\n"


def _fence(text: str) -> str:
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}bash\n{text}\n{fence}"
