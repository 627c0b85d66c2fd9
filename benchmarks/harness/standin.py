"""A stand-in for a vLLM OpenAI server, for tests and the client benchmark: real HTTP/1.1 over loopback,
no model.

It serves ``POST /v1/completions`` (streamed as vLLM streams it: SSE ``data: {json}`` events, one
chunk per decode step with ``choices``, then, when ``stream_options.include_usage`` is set, a final
chunk with ``choices: []`` and ``usage``, then ``data: [DONE]``), ``POST /v1/chat/completions`` (the
same, in vLLM's chat format: a first chunk ``delta: {role: assistant, content: ""}``, then one
``delta: {content}`` chunk per decode step), ``GET /health``, ``GET /version``, ``GET /v1/models`` and
``GET /metrics`` (Prometheus text with the vLLM gauges and counters that nova reads, moved by the
requests it serves).

Prompt tokens: a list of ids counts its length; text (a string prompt, or the chat messages'
contents, summed, no template) counts with ``tokenizer`` (a tokenizer.json) when given, else words.
With ``record_prompts`` every request's prompt is kept in ``stats().prompts``.

The output is always exactly ``max_tokens`` tokens, ``tokens_per_chunk`` to a chunk (the last chunk
carries the rest), after ``ttft_s`` and with ``itl_s`` between chunks. Faults on demand: a required
API key (401), HTTP 500 for every Nth request, a connection closed mid-stream for every Nth request.

In a test::

    with standin_server(tokens_per_chunk=3, ttft_s=0.05, itl_s=0.01) as srv:
        target = Target(srv.base_url, srv.model, srv.api_key)
        ...
        srv.stats().max_in_flight

From a shell: ``python -m benchmarks.harness.standin --port 8000 --tokens-per-chunk 3``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import json
import signal
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from typing import Any

REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    411: "Length Required",
    500: "Internal Server Error",
}
#: the "vocabulary" the stand-in decodes to; every token is a non-empty word
WORDS = tuple(f" w{i}" for i in range(50))


@dataclass(frozen=True)
class StandinOptions:
    model: str = "standin"
    #: output tokens per streamed chunk (several mimic speculative decoding); the last chunk may carry fewer
    tokens_per_chunk: int = 1
    #: delay from the request's arrival to the first chunk (the headers go out at once, as in vLLM)
    ttft_s: float = 0.0
    #: delay between chunks
    itl_s: float = 0.0
    #: send cumulative ``usage`` in every chunk when the request asks for ``continuous_usage_stats``
    #: (as vLLM does); False: only the final usage chunk
    running_usage: bool = True
    #: when set, ``/v1/*`` needs ``Authorization: Bearer <api_key>`` (401 otherwise), as vLLM's --api-key
    api_key: str | None = None
    #: every Nth completion request (counted from 1) gets HTTP 500; 0: never
    error_every: int = 0
    #: every Nth completion request has its connection closed after ``drop_after_chunks`` chunks; 0: never
    drop_every: int = 0
    drop_after_chunks: int = 1
    #: tokens drafted per decode step for the spec-decode counters; None: ``tokens_per_chunk``.
    #: A chunk of k tokens counts as one draft with k - 1 tokens accepted.
    num_spec_tokens: int | None = None
    #: KV cache size in tokens; ``vllm:kv_cache_usage_perc`` is the in-flight tokens' share of it
    kv_capacity_tokens: int = 65_536
    version: str = "0.0.0+standin"
    #: a tokenizer.json that counts text prompt tokens exactly; None: whitespace-separated words
    tokenizer: str | None = None
    #: keep every request's prompt in ``stats().prompts`` (``{"endpoint", "prompt" | "messages",
    #: "max_tokens"}``)
    record_prompts: bool = False
    #: serve vLLM's sleep-mode endpoints (``POST /sleep``, ``POST /wake_up``, ``GET /is_sleeping``);
    #: while asleep, completions get HTTP 503. ``on_sleep(event)`` is called with "sleep" / "wake"
    sleep_mode: bool = False
    on_sleep: Any = None

    def __post_init__(self) -> None:
        if self.tokens_per_chunk < 1:
            raise ValueError("tokens_per_chunk must be >= 1")
        if self.ttft_s < 0 or self.itl_s < 0:
            raise ValueError("ttft_s and itl_s must be >= 0")


@dataclass
class StandinStats:
    """What the stand-in saw. ``arrivals`` are ``time.perf_counter()`` times (the same clock as
    nova's records when the stand-in runs in the test's process)."""

    requests: int = 0  # completion and chat requests past the API-key check
    chat_requests: int = 0  # of which chat
    unauthorized: int = 0
    errors: int = 0  # HTTP 500 sent
    dropped: int = 0  # connections closed mid-stream
    completed: int = 0  # streams (or JSON responses) sent in full
    in_flight: int = 0
    max_in_flight: int = 0
    tokens_served: int = 0
    metrics_reads: int = 0
    arrivals: list[float] = field(default_factory=list)
    #: when each /metrics read arrived (``time.perf_counter()``)
    metrics_times: list[float] = field(default_factory=list)
    #: with ``record_prompts``: what each request asked, in arrival order
    prompts: list[dict[str, object]] = field(default_factory=list)
    #: with ``sleep_mode``: "sleep" / "wake", in order
    switches: list[str] = field(default_factory=list)


@dataclass
class _Engine:
    """The counters and gauges /metrics shows."""

    prompt_tokens: int = 0
    generation_tokens: int = 0
    kv_tokens: int = 0  # tokens held by in-flight requests
    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    accepted_per_pos: dict[int, int] = field(default_factory=dict)
    prefix_queries: int = 0


class _BadRequest(Exception):
    pass


class _Request:
    __slots__ = ("method", "path", "headers", "body")

    def __init__(self, method: str, path: str, headers: dict[str, str], body: bytes) -> None:
        self.method, self.path, self.headers, self.body = method, path, headers, body

    @property
    def keep_alive(self) -> bool:
        return self.headers.get("connection", "").lower() != "close"


class StandinApp:
    """The protocol and the state; runs on whatever event loop calls :meth:`start`."""

    def __init__(self, options: StandinOptions) -> None:
        self.options = options
        self._lock = threading.Lock()  # stats are read from other threads
        self._stats = StandinStats()
        self._engine = _Engine()
        self.asleep = False
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._model_json = json.dumps(options.model)
        self._tokenizer = None
        if options.tokenizer is not None:
            from tokenizers import Tokenizer

            self._tokenizer = Tokenizer.from_file(options.tokenizer)
        self.port = 0

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self, host: str = "127.0.0.1", port: int = 0, reuse_port: bool = False) -> int:
        self._server = await asyncio.start_server(
            self._connection, host, port, reuse_port=reuse_port or None, backlog=1024
        )
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for t in list(self._tasks):
            t.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    def stats(self) -> StandinStats:
        with self._lock:
            return copy.deepcopy(self._stats)

    def reset_stats(self) -> None:
        with self._lock:
            in_flight = self._stats.in_flight
            self._stats = StandinStats(in_flight=in_flight, max_in_flight=in_flight)

    # -- HTTP ---------------------------------------------------------------------------------

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)  # type: ignore[arg-type]
        try:
            while True:
                try:
                    req = await _read_request(reader)
                except _BadRequest as e:
                    _write_json(writer, 400, {"error": str(e)}, keep_alive=False)
                    await writer.drain()
                    break
                if req is None:
                    break
                if not await self._dispatch(req, writer):
                    break
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            self._tasks.discard(task)  # type: ignore[arg-type]
            writer.close()

    async def _dispatch(self, req: _Request, writer: asyncio.StreamWriter) -> bool:
        """Serve one request; False when the connection must be closed."""
        path = req.path.split("?", 1)[0]
        keep = req.keep_alive
        routes = {
            "/v1/completions": "POST",
            "/v1/chat/completions": "POST",
            "/health": "GET",
            "/version": "GET",
            "/metrics": "GET",
            "/v1/models": "GET",
        }
        if self.options.sleep_mode:
            routes.update({"/sleep": "POST", "/wake_up": "POST", "/is_sleeping": "GET"})
        if path not in routes:
            _write_json(writer, 404, {"detail": "Not Found"}, keep)
        elif req.method != routes[path]:
            _write_json(writer, 405, {"detail": "Method Not Allowed"}, keep)
        elif path.startswith("/v1/") and not self._authorized(req):
            with self._lock:
                self._stats.unauthorized += 1
            _write_json(writer, 401, {"error": "Unauthorized"}, keep)
        elif path.startswith("/v1/") and path != "/v1/models" and self.asleep:
            _write_json(writer, 503, _error("the engine is asleep", "ServiceUnavailable", 503), keep)
        elif path in ("/sleep", "/wake_up"):
            self.asleep = path == "/sleep"
            with self._lock:
                self._stats.switches.append("sleep" if self.asleep else "wake")
            if self.options.on_sleep is not None:
                self.options.on_sleep("sleep" if self.asleep else "wake")
            _write(writer, 200, b"", "application/json", keep)
        elif path == "/is_sleeping":
            _write_json(writer, 200, {"is_sleeping": self.asleep}, keep)
        elif path == "/v1/completions":
            return await self._completions(req, writer, chat=False)
        elif path == "/v1/chat/completions":
            return await self._completions(req, writer, chat=True)
        elif path == "/health":
            _write(writer, 200, b"", "application/json", keep)
        elif path == "/version":
            _write_json(writer, 200, {"version": self.options.version}, keep)
        elif path == "/v1/models":
            model = {"id": self.options.model, "object": "model", "owned_by": "standin"}
            _write_json(writer, 200, {"object": "list", "data": [model]}, keep)
        else:  # /metrics
            with self._lock:
                self._stats.metrics_reads += 1
                self._stats.metrics_times.append(time.perf_counter())
            text = self.metrics_text().encode()
            _write(writer, 200, text, "text/plain; version=0.0.4; charset=utf-8", keep)
        await writer.drain()
        return keep

    def _authorized(self, req: _Request) -> bool:
        key = self.options.api_key
        return key is None or req.headers.get("authorization") == f"Bearer {key}"

    # -- /v1/completions, /v1/chat/completions -----------------------------------------------

    def _count_text(self, text: str) -> int:
        if self._tokenizer is not None:
            return len(self._tokenizer.encode(text, add_special_tokens=False).ids)
        return len(text.split())

    def _count_prompt(self, body: dict[str, object], chat: bool) -> int:
        if chat:
            messages = body["messages"]
            if not isinstance(messages, list) or not messages:
                raise ValueError("messages must be a non-empty list")
            n = 0
            for m in messages:
                if not isinstance(m, dict) or not isinstance(m.get("role"), str):
                    raise ValueError("each message needs a role")
                content = m.get("content")
                if not isinstance(content, str):
                    raise ValueError("message content must be a string")
                n += self._count_text(content)
            return n
        prompt = body["prompt"]
        if isinstance(prompt, str):
            return self._count_text(prompt)
        if isinstance(prompt, list) and all(isinstance(t, int) for t in prompt):
            return len(prompt)
        raise ValueError("prompt must be a string or a list of token ids")

    async def _completions(self, req: _Request, writer: asyncio.StreamWriter, chat: bool) -> bool:
        opts = self.options
        keep = req.keep_alive
        try:
            body = json.loads(req.body)
            n_prompt = self._count_prompt(body, chat)
            limit = body.get("max_completion_tokens") if chat else None
            max_tokens = int(limit or body.get("max_tokens") or 16)
            if max_tokens < 1:
                raise ValueError("max_tokens must be at least 1")
        except (ValueError, KeyError, TypeError) as e:
            _write_json(writer, 400, _error(f"bad request: {e}", "BadRequestError", 400), keep)
            await writer.drain()
            return keep
        if body.get("model") not in (None, opts.model):
            msg = f"The model `{body.get('model')}` does not exist."
            _write_json(writer, 404, _error(msg, "NotFoundError", 404), keep)
            await writer.drain()
            return keep

        with self._lock:
            st = self._stats
            st.requests += 1
            st.chat_requests += chat
            number = st.requests
            st.arrivals.append(time.perf_counter())
            if opts.record_prompts:
                key = "messages" if chat else "prompt"
                endpoint = "chat" if chat else "completions"
                st.prompts.append({"endpoint": endpoint, key: body[key], "max_tokens": max_tokens})
        if opts.error_every and number % opts.error_every == 0:
            with self._lock:
                self._stats.errors += 1
            msg = f"stand-in: injected error (request {number})"
            _write_json(writer, 500, _error(msg, "InternalServerError", 500), keep)
            await writer.drain()
            return keep
        drop = bool(opts.drop_every and number % opts.drop_every == 0)

        with self._lock:
            st = self._stats
            st.in_flight += 1
            st.max_in_flight = max(st.max_in_flight, st.in_flight)
            self._engine.prompt_tokens += n_prompt
            self._engine.prefix_queries += n_prompt
            self._engine.kv_tokens += n_prompt
        held = [n_prompt]  # KV tokens this request holds, released however it ends
        try:
            if body.get("stream"):
                ok = await self._stream(writer, body, n_prompt, max_tokens, drop, held, chat)
            else:
                ok = await self._whole(writer, n_prompt, max_tokens, drop, keep, held, chat)
        finally:
            with self._lock:
                self._stats.in_flight -= 1
                self._engine.kv_tokens -= held[0]
        with self._lock:
            if ok:
                self._stats.completed += 1
            else:
                self._stats.dropped += 1
        if not ok:
            writer.transport.close()  # mid-body: the client sees an incomplete message
            return False
        return keep

    def _chunks(self, max_tokens: int) -> Iterator[tuple[int, int]]:
        """(tokens in this chunk, tokens so far) per chunk."""
        k = self.options.tokens_per_chunk
        done = 0
        while done < max_tokens:
            n = min(k, max_tokens - done)
            done += n
            yield n, done

    def _account(self, n: int) -> None:
        k_spec = self.options.num_spec_tokens
        e = self._engine
        with self._lock:
            self._stats.tokens_served += n
            e.generation_tokens += n
            e.kv_tokens += n
            e.drafts += 1
            e.draft_tokens += self.options.tokens_per_chunk if k_spec is None else k_spec
            e.accepted += n - 1
            for pos in range(n - 1):
                e.accepted_per_pos[pos] = e.accepted_per_pos.get(pos, 0) + 1

    async def _stream(
        self,
        writer: asyncio.StreamWriter,
        body: dict[str, object],
        n_prompt: int,
        max_tokens: int,
        drop: bool,
        held: list[int],
        chat: bool,
    ) -> bool:
        opts = self.options
        stream_options = body.get("stream_options") or {}
        assert isinstance(stream_options, dict)
        include_usage = bool(stream_options.get("include_usage"))
        running = include_usage and opts.running_usage and bool(stream_options.get("continuous_usage_stats"))
        head = _head(200, "text/event-stream; charset=utf-8", None, keep_alive=True)
        writer.write(head)
        await writer.drain()
        rid = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}"
        created = int(time.time())
        kind = "chat.completion.chunk" if chat else "text_completion"
        prefix = f'{{"id":"{rid}","object":"{kind}","created":{created},"model":{self._model_json},'
        if chat:  # vLLM's first chat chunk: the role, no tokens (with running usage: 0 of them)
            usage = f',"usage":{_usage(n_prompt, 0)}' if running else ""
            role = '{"role":"assistant","content":""}'
            writer.write(
                _sse(
                    f'{prefix}"choices":[{{"index":0,"delta":{role},"logprobs":null,"finish_reason":null}}]{usage}}}'
                )
            )
            await writer.drain()
        await asyncio.sleep(opts.ttft_s)
        for i, (n, done) in enumerate(self._chunks(max_tokens)):
            if i:
                await asyncio.sleep(opts.itl_s)
            if drop and i == opts.drop_after_chunks:
                await writer.drain()
                return False
            text = json.dumps("".join(WORDS[(done - n + j) % len(WORDS)] for j in range(n)))
            finish = '"length"' if done == max_tokens else "null"
            usage = f',"usage":{_usage(n_prompt, done)}' if running else ""
            piece = f'"delta":{{"content":{text}}}' if chat else f'"text":{text}'
            writer.write(
                _sse(
                    f'{prefix}"choices":[{{"index":0,{piece},"logprobs":null,'
                    f'"finish_reason":{finish},"stop_reason":null}}]{usage}}}'
                )
            )
            self._account(n)
            held[0] += n
            await writer.drain()
        if include_usage:
            writer.write(_sse(f'{prefix}"choices":[],"usage":{_usage(n_prompt, max_tokens)}}}'))
        writer.write(_sse("[DONE]") + b"0\r\n\r\n")
        await writer.drain()
        return True

    async def _whole(
        self,
        writer: asyncio.StreamWriter,
        n_prompt: int,
        max_tokens: int,
        drop: bool,
        keep: bool,
        held: list[int],
        chat: bool,
    ) -> bool:
        opts = self.options
        texts: list[str] = []
        await asyncio.sleep(opts.ttft_s)
        for i, (n, done) in enumerate(self._chunks(max_tokens)):
            if i:
                await asyncio.sleep(opts.itl_s)
            texts.extend(WORDS[(done - n + j) % len(WORDS)] for j in range(n))
            self._account(n)
            held[0] += n
        if drop:
            writer.write(_head(200, "application/json", 1_000_000, keep_alive=True))
            await writer.drain()
            return False
        out = "".join(texts)
        choice: dict[str, object] = {"index": 0}
        choice.update({"message": {"role": "assistant", "content": out}} if chat else {"text": out})
        choice.update({"logprobs": None, "finish_reason": "length", "stop_reason": None})
        _write_json(
            writer,
            200,
            {
                "id": f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}",
                "object": "chat.completion" if chat else "text_completion",
                "created": int(time.time()),
                "model": opts.model,
                "choices": [choice],
                "usage": json.loads(_usage(n_prompt, max_tokens)),
            },
            keep,
        )
        await writer.drain()
        return True

    # -- /metrics -----------------------------------------------------------------------------

    def metrics_text(self) -> str:
        labels = f'engine="0",model_name="{self.options.model}"'
        with self._lock:
            st, e = self._stats, self._engine
            kv = min(1.0, e.kv_tokens / max(self.options.kv_capacity_tokens, 1))
            gauges = [
                ("vllm:num_requests_running", "Number of requests in model execution batches.", st.in_flight),
                ("vllm:num_requests_waiting", "Number of requests waiting to be processed.", 0),
                ("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", kv),
            ]
            counters = [
                ("vllm:num_preemptions", "Cumulative number of preemptions.", 0),
                ("vllm:prompt_tokens", "Number of prefill tokens processed.", e.prompt_tokens),
                ("vllm:generation_tokens", "Number of generation tokens processed.", e.generation_tokens),
                ("vllm:prefix_cache_queries", "Prefix cache queries, in tokens.", e.prefix_queries),
                ("vllm:prefix_cache_hits", "Prefix cache hits, in tokens.", 0),
                ("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", e.drafts),
                ("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", e.draft_tokens),
                ("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.", e.accepted),
            ]
            per_pos = sorted(e.accepted_per_pos.items())
        out: list[str] = []
        for name, help_, value in gauges:
            out += [f"# HELP {name} {help_}", f"# TYPE {name} gauge", f"{name}{{{labels}}} {float(value)}"]
        for name, help_, value in counters:
            out += [
                f"# HELP {name}_total {help_}",
                f"# TYPE {name}_total counter",
                f"{name}_total{{{labels}}} {float(value)}",
            ]
        name = "vllm:spec_decode_num_accepted_tokens_per_pos"
        out += [f"# HELP {name}_total Accepted tokens per draft position.", f"# TYPE {name}_total counter"]
        out += [f'{name}_total{{{labels},position="{p}"}} {float(v)}' for p, v in per_pos]
        return "\n".join(out) + "\n"


# -- wire helpers -------------------------------------------------------------------------------


async def _read_request(reader: asyncio.StreamReader) -> _Request | None:
    line = await reader.readline()
    if not line:
        return None
    parts = line.decode("latin-1").split()
    if len(parts) != 3:
        raise _BadRequest("malformed request line")
    method, path, _version = parts
    headers: dict[str, str] = {}
    while True:
        h = await reader.readline()
        if h in (b"\r\n", b"\n", b""):
            break
        name, _, value = h.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        raise _BadRequest("chunked request bodies are not supported; send Content-Length")
    try:
        length = int(headers.get("content-length", "0"))
    except ValueError:
        raise _BadRequest("bad Content-Length") from None
    body = await reader.readexactly(length) if length else b""
    return _Request(method, path, headers, body)


def _head(status: int, ctype: str, length: int | None, keep_alive: bool) -> bytes:
    lines = [
        f"HTTP/1.1 {status} {REASONS.get(status, 'Unknown')}",
        f"content-type: {ctype}",
        "server: nova-standin",
    ]
    lines.append("transfer-encoding: chunked" if length is None else f"content-length: {length}")
    if not keep_alive:
        lines.append("connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _write(writer: asyncio.StreamWriter, status: int, body: bytes, ctype: str, keep: bool) -> None:
    writer.write(_head(status, ctype, len(body), keep) + body)


def _write_json(writer: asyncio.StreamWriter, status: int, obj: object, keep_alive: bool) -> None:
    _write(writer, status, json.dumps(obj).encode(), "application/json", keep_alive)


def _sse(data: str) -> bytes:
    """One SSE event as one HTTP chunk."""
    payload = f"data: {data}\n\n".encode()
    return f"{len(payload):x}\r\n".encode() + payload + b"\r\n"


def _usage(prompt: int, completion: int) -> str:
    return (
        f'{{"prompt_tokens":{prompt},"total_tokens":{prompt + completion},"completion_tokens":{completion}}}'
    )


def _error(message: str, type_: str, code: int) -> dict[str, object]:
    return {"object": "error", "message": message, "type": type_, "param": None, "code": code}


# -- running it -----------------------------------------------------------------------------------


class StandinServer:
    """The stand-in on its own event loop in a daemon thread."""

    def __init__(self, options: StandinOptions | None = None, host: str = "127.0.0.1", port: int = 0) -> None:
        self.options = options or StandinOptions()
        self.app = StandinApp(self.options)
        self.host = host
        self._port = port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self.app.port

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def api_key(self) -> str | None:
        return self.options.api_key

    @property
    def model(self) -> str:
        return self.options.model

    def stats(self) -> StandinStats:
        return self.app.stats()

    def reset_stats(self) -> None:
        self.app.reset_stats()

    def start(self) -> StandinServer:
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self.app.start(self.host, self._port))
            except BaseException as e:  # noqa: BLE001 - handed to the starting thread
                failure.append(e)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(self.app.close())
                loop.close()

        self._thread = threading.Thread(target=run, name="nova-standin", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            raise failure[0]
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
        self._thread = None

    def __enter__(self) -> StandinServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def standin_server(**options: object) -> Iterator[StandinServer]:
    """Start a stand-in (keyword arguments: :class:`StandinOptions` fields) and stop it after."""
    server = StandinServer(StandinOptions(**options)).start()  # type: ignore[arg-type]
    try:
        yield server
    finally:
        server.stop()


async def serve(options: StandinOptions, host: str, port: int, reuse_port: bool) -> None:
    app = StandinApp(options)
    bound = await app.start(host, port, reuse_port=reuse_port)
    print(f"standin listening on http://{host}:{bound}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await app.close()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.harness.standin", description=__doc__.split("\n")[0]
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000, help="0: any free port (printed)")
    p.add_argument("--reuse-port", action="store_true", help="SO_REUSEPORT, to run several processes")
    defaults = StandinOptions()
    for f in fields(StandinOptions):
        flag = "--" + f.name.replace("_", "-")
        default = getattr(defaults, f.name)
        if isinstance(default, bool):
            p.add_argument(flag, action=argparse.BooleanOptionalAction, default=default)
        elif f.name in ("api_key", "num_spec_tokens", "tokenizer"):
            p.add_argument(flag, type=int if f.name == "num_spec_tokens" else str, default=default)
        else:
            p.add_argument(flag, type=type(default), default=default)
    args = p.parse_args(argv)
    options = StandinOptions(**{f.name: getattr(args, f.name) for f in fields(StandinOptions)})
    asyncio.run(serve(options, args.host, args.port, args.reuse_port))


if __name__ == "__main__":
    sys.exit(main())
