"""The stand-in's protocol and state (``StandinApp``): the routes, streamed and plain completions,
sleep mode, /metrics; it runs on whatever event loop starts it."""

from __future__ import annotations

import asyncio
import copy
import json
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

from nova_search.testing.standin.options import StandinOptions, StandinStats
from nova_search.testing.standin.wire import (
    BadRequest,
    Request,
    error_body,
    read_request,
    response_head,
    sse_chunk,
    usage_json,
    write_body,
    write_json,
)

#: the "vocabulary" the stand-in decodes to; every token is a non-empty word
WORDS = tuple(f" w{i}" for i in range(50))


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
                    req = await read_request(reader)
                except BadRequest as e:
                    write_json(writer, 400, {"error": str(e)}, keep_alive=False)
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

    async def _dispatch(self, req: Request, writer: asyncio.StreamWriter) -> bool:
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
            write_json(writer, 404, {"detail": "Not Found"}, keep)
        elif req.method != routes[path]:
            write_json(writer, 405, {"detail": "Method Not Allowed"}, keep)
        elif path.startswith("/v1/") and not self._authorized(req):
            with self._lock:
                self._stats.unauthorized += 1
            write_json(writer, 401, {"error": "Unauthorized"}, keep)
        elif path.startswith("/v1/") and path != "/v1/models" and self.asleep:
            write_json(writer, 503, error_body("the engine is asleep", "ServiceUnavailable", 503), keep)
        elif path in ("/sleep", "/wake_up"):
            self.asleep = path == "/sleep"
            with self._lock:
                self._stats.switches.append("sleep" if self.asleep else "wake")
            if self.options.on_sleep is not None:
                self.options.on_sleep("sleep" if self.asleep else "wake")
            write_body(writer, 200, b"", "application/json", keep)
        elif path == "/is_sleeping":
            write_json(writer, 200, {"is_sleeping": self.asleep}, keep)
        elif path == "/v1/completions":
            return await self._completions(req, writer, chat=False)
        elif path == "/v1/chat/completions":
            return await self._completions(req, writer, chat=True)
        elif path == "/health":
            write_body(writer, 200, b"", "application/json", keep)
        elif path == "/version":
            write_json(writer, 200, {"version": self.options.version}, keep)
        elif path == "/v1/models":
            model = {"id": self.options.model, "object": "model", "owned_by": "standin"}
            write_json(writer, 200, {"object": "list", "data": [model]}, keep)
        else:  # /metrics
            with self._lock:
                self._stats.metrics_reads += 1
                self._stats.metrics_times.append(time.perf_counter())
            text = self.metrics_text().encode()
            write_body(writer, 200, text, "text/plain; version=0.0.4; charset=utf-8", keep)
        await writer.drain()
        return keep

    def _authorized(self, req: Request) -> bool:
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

    async def _completions(self, req: Request, writer: asyncio.StreamWriter, chat: bool) -> bool:
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
            write_json(writer, 400, error_body(f"bad request: {e}", "BadRequestError", 400), keep)
            await writer.drain()
            return keep
        if body.get("model") not in (None, opts.model):
            msg = f"The model `{body.get('model')}` does not exist."
            write_json(writer, 404, error_body(msg, "NotFoundError", 404), keep)
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
            write_json(writer, 500, error_body(msg, "InternalServerError", 500), keep)
            await writer.drain()
            return keep
        drop = bool(opts.drop_every and number % opts.drop_every == 0)

        with self._lock:
            st = self._stats
            st.in_flight += 1
            st.max_in_flight = max(st.max_in_flight, st.in_flight)
            # past the knee the batch is compute-bound: every delay stretches with the requests in flight
            stretch = max(1.0, st.in_flight / opts.knee_in_flight) if opts.knee_in_flight else 1.0
            self._engine.prompt_tokens += n_prompt
            self._engine.prefix_queries += n_prompt
            self._engine.kv_tokens += n_prompt
        held = [n_prompt]  # KV tokens this request holds, released however it ends
        try:
            if body.get("stream"):
                ok = await self._stream(writer, body, n_prompt, max_tokens, drop, held, chat, stretch)
            else:
                ids = bool(body.get("return_token_ids"))
                ok = await self._whole(writer, n_prompt, max_tokens, drop, keep, held, chat, stretch, ids)
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

    def _token(self, position: int) -> int:
        """The id of the token generated at ``position`` (an index into ``WORDS``)."""
        return (position + self.options.token_shift) % len(WORDS)

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
        stretch: float = 1.0,
    ) -> bool:
        opts = self.options
        stream_options = body.get("stream_options") or {}
        assert isinstance(stream_options, dict)
        include_usage = bool(stream_options.get("include_usage"))
        running = include_usage and opts.running_usage and bool(stream_options.get("continuous_usage_stats"))
        head = response_head(200, "text/event-stream; charset=utf-8", None, keep_alive=True)
        writer.write(head)
        await writer.drain()
        rid = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}"
        created = int(time.time())
        kind = "chat.completion.chunk" if chat else "text_completion"
        prefix = f'{{"id":"{rid}","object":"{kind}","created":{created},"model":{self._model_json},'
        if chat:  # vLLM's first chat chunk: the role, no tokens (with running usage: 0 of them)
            usage = f',"usage":{usage_json(n_prompt, 0)}' if running else ""
            role = '{"role":"assistant","content":""}'
            writer.write(
                sse_chunk(
                    f'{prefix}"choices":[{{"index":0,"delta":{role},"logprobs":null,"finish_reason":null}}]{usage}}}'
                )
            )
            await writer.drain()
        await asyncio.sleep(opts.ttft_s * stretch)
        for i, (n, done) in enumerate(self._chunks(max_tokens)):
            if i:
                await asyncio.sleep(opts.itl_s * stretch)
            if drop and i == opts.drop_after_chunks:
                await writer.drain()
                return False
            text = json.dumps("".join(WORDS[self._token(done - n + j)] for j in range(n)))
            finish = '"length"' if done == max_tokens else "null"
            usage = f',"usage":{usage_json(n_prompt, done)}' if running else ""
            piece = f'"delta":{{"content":{text}}}' if chat else f'"text":{text}'
            writer.write(
                sse_chunk(
                    f'{prefix}"choices":[{{"index":0,{piece},"logprobs":null,'
                    f'"finish_reason":{finish},"stop_reason":null}}]{usage}}}'
                )
            )
            self._account(n)
            held[0] += n
            await writer.drain()
        if include_usage:
            writer.write(sse_chunk(f'{prefix}"choices":[],"usage":{usage_json(n_prompt, max_tokens)}}}'))
        writer.write(sse_chunk("[DONE]") + b"0\r\n\r\n")
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
        stretch: float = 1.0,
        token_ids: bool = False,
    ) -> bool:
        opts = self.options
        ids: list[int] = []
        await asyncio.sleep(opts.ttft_s * stretch)
        for i, (n, done) in enumerate(self._chunks(max_tokens)):
            if i:
                await asyncio.sleep(opts.itl_s * stretch)
            ids.extend(self._token(done - n + j) for j in range(n))
            self._account(n)
            held[0] += n
        if drop:
            writer.write(response_head(200, "application/json", 1_000_000, keep_alive=True))
            await writer.drain()
            return False
        out = "".join(WORDS[i] for i in ids)
        choice: dict[str, object] = {"index": 0}
        choice.update({"message": {"role": "assistant", "content": out}} if chat else {"text": out})
        if token_ids:  # vLLM's return_token_ids
            choice["token_ids"] = ids
        choice.update({"logprobs": None, "finish_reason": "length", "stop_reason": None})
        write_json(
            writer,
            200,
            {
                "id": f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}",
                "object": "chat.completion" if chat else "text_completion",
                "created": int(time.time()),
                "model": opts.model,
                "choices": [choice],
                "usage": json.loads(usage_json(n_prompt, max_tokens)),
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
