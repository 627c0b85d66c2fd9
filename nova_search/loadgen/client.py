"""One streamed request -> RequestRecord. It never raises: failures are data (``success=False``).

A prompt of token ids goes to /v1/completions (``choices[0].text`` chunks); a prompt with
``messages`` to /v1/chat/completions (``choices[0].delta.content`` chunks, after a first chunk that
only declares the assistant role). Both are parsed the same way.

Tokens per chunk are counted exactly from the server's running usage
(``stream_options: {include_usage: true, continuous_usage_stats: true}``): with speculative decoding
one chunk carries several tokens, and a token may decode to empty text. Servers that send no running
usage fall back to one token per chunk that carries text, corrected by the final usage.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import httpx

from nova_search.loadgen.workload import Prompt
from nova_search.records import RequestRecord


@dataclass(frozen=True, slots=True)
class Target:
    base_url: str
    model: str
    api_key: str | None = None

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}


PATHS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}


def _stream() -> dict[str, object]:
    return {"stream": True, "stream_options": {"include_usage": True, "continuous_usage_stats": True}}


def completion_payload(target: Target, prompt: Prompt) -> dict[str, object]:
    return {
        "model": target.model,
        "prompt": list(prompt.token_ids),
        "max_tokens": prompt.output_len,
        "ignore_eos": True,
        "temperature": 0.0,
        **_stream(),
    }


def chat_payload(target: Target, prompt: Prompt) -> dict[str, object]:
    return {
        "model": target.model,
        "messages": [{"role": m.role, "content": m.content} for m in prompt.messages],
        "max_completion_tokens": prompt.output_len,
        "ignore_eos": True,
        "temperature": 0.0,
        **_stream(),
    }


def payload(target: Target, prompt: Prompt) -> tuple[str, dict[str, object]]:
    """The URL path and the JSON body for a prompt."""
    if prompt.messages:
        return PATHS["chat"], chat_payload(target, prompt)
    return PATHS["completions"], completion_payload(target, prompt)


def _has_text(choice: dict[str, object]) -> bool:
    """Whether a streamed choice carries generated text (completions ``text``; chat ``delta``
    content, or a reasoning model's reasoning text)."""
    if choice.get("text"):
        return True
    delta = choice.get("delta")
    if isinstance(delta, dict):
        return bool(delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning"))
    return False


async def send(client: httpx.AsyncClient, target: Target, prompt: Prompt) -> RequestRecord:
    times: list[float] = []
    tokens: list[int] = []
    prompt_tokens = len(prompt.token_ids)
    seen = 0  # running completion_tokens
    final_usage: int | None = None
    status: int | None = None
    path, body = payload(target, prompt)
    send_time = time.perf_counter()
    try:
        async with client.stream(
            "POST", f"{target.base_url}{path}", json=body, headers=target.headers
        ) as resp:
            status = resp.status_code
            if status != 200:
                body = (await resp.aread()).decode(errors="replace")[:300]
                return _failed(send_time, f"HTTP {status}: {body}", status, prompt_tokens)
            async for line in resp.aiter_lines():
                now = time.perf_counter()
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                chunk = json.loads(data)
                if "error" in chunk:
                    return _failed(send_time, f"stream error: {chunk['error']}", status, prompt_tokens)
                usage = chunk.get("usage") or {}
                choices = chunk.get("choices") or []
                if usage.get("prompt_tokens") is not None:
                    prompt_tokens = int(usage["prompt_tokens"])
                if not choices:
                    if usage.get("completion_tokens") is not None:
                        final_usage = int(usage["completion_tokens"])
                    continue
                if usage.get("completion_tokens") is not None:
                    n = int(usage["completion_tokens"]) - seen
                elif _has_text(choices[0]):
                    n = 1
                else:
                    n = 0
                if n > 0:
                    seen += n
                    times.append(now)
                    tokens.append(n)
    except Exception as e:  # noqa: BLE001 - a failed request is data, whatever broke
        return _failed(send_time, f"{type(e).__name__}: {e}"[:300], status, prompt_tokens)
    end = time.perf_counter()
    if final_usage is not None and final_usage != seen and tokens:
        # no running usage: put the missing tokens on the last chunk so totals are exact
        tokens[-1] += final_usage - seen
        seen = final_usage
    if not times:
        return _failed(send_time, "stream ended without output tokens", status, prompt_tokens)
    return RequestRecord(
        send_time=send_time,
        end_time=end,
        success=True,
        prompt_tokens=prompt_tokens,
        output_tokens=seen,
        chunk_times=tuple(times),
        chunk_tokens=tuple(tokens),
        status_code=status,
    )


def _failed(send_time: float, error: str, status: int | None, prompt_tokens: int) -> RequestRecord:
    return RequestRecord(
        send_time=send_time,
        end_time=time.perf_counter(),
        success=False,
        prompt_tokens=prompt_tokens,
        error=error,
        status_code=status,
    )
