"""A lean HTTP/1.1 client for the load generator's hot path: keep-alive connections on
``asyncio.Protocol``, responses parsed as the bytes arrive.

Why not httpx or aiohttp: a streamed completion is one small SSE event per decode step, so the client's
cost per event is what limits how fast one process can measure. A stream reader wakes the request's
task once per socket read (a scheduler round trip per event) and hands over text lines; here the
protocol's ``data_received`` does the whole job in the read callback: it stamps the read's arrival
time once, undoes the chunked transfer coding and hands each complete SSE ``data:`` payload, as bytes,
to the request's ``on_event`` callback. The request's coroutine sleeps on one future until the
response is complete. ``benchmarks/client_overhead.py`` measures the difference (docs/metrics.md has the
figures).

What it speaks: HTTP/1.1 over TCP (``http://``) or TLS (``https://``), ``Content-Length`` and
``Transfer-Encoding: chunked`` bodies, keep-alive (a connection returns to its pool once a response
is complete, and is dropped when the server says ``Connection: close`` or closes it). No proxies, no
redirects, no compression (it never asks for any). Errors never escape as exceptions from
:meth:`Pool.request`: a failed exchange is a :class:`Reply` with ``error`` set.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

#: called with the SSE ``data:`` payloads (bytes, without the ``data:`` prefix) completed by one
#: socket read, in order, and that read's arrival time (``time.perf_counter()``); returns False to
#: stop reading (an error the caller has seen: the connection is then dropped)
EventSink = Callable[[list[bytes], float], bool]

#: most bytes of a non-streamed (or error) body kept
MAX_BODY = 8 << 20


@dataclass(frozen=True, slots=True)
class Origin:
    """Where requests go: scheme, host, port, and a path prefix (``http://h:8000/proxy`` -> ``/proxy``)."""

    host: str
    port: int
    tls: bool
    prefix: str

    @classmethod
    def parse(cls, base_url: str) -> Origin:
        u = urlsplit(base_url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        tls = u.scheme == "https"
        return cls(u.hostname, u.port or (443 if tls else 80), tls, u.path.rstrip("/"))

    @property
    def host_header(self) -> str:
        default = 443 if self.tls else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"


@dataclass(slots=True)
class Reply:
    """The outcome of one exchange. ``status`` is None when no status line came back; ``body`` is the
    body of a non-streamed response (and of any response whose status is not 200); ``error`` is set
    when the exchange did not complete (connection refused or lost, timeout, malformed response)."""

    status: int | None = None
    body: bytes = b""
    error: str = ""
    #: the response ended because the event sink asked to stop (the rest of the body was not read)
    stopped: bool = False


class _Connection(asyncio.Protocol):
    """One keep-alive connection; one exchange at a time."""

    def __init__(self, pool: Pool) -> None:
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._reset()

    def _reset(self) -> None:
        self.waiter: asyncio.Future[Reply] | None = None
        self.sink: EventSink | None = None
        self.reply = Reply()
        self.head = bytearray()  # status line and headers, until the blank line
        self.in_body = False
        self.chunked = False
        self.remaining = -1  # Content-Length body: bytes left; -1: read until close
        self.chunk_left = 0  # chunked: payload bytes left in the current chunk
        self.raw = b""  # chunked framing not yet decoded
        self.body = bytearray()
        self.events = b""  # SSE text not yet split into events
        self.keep_alive = True
        self.got_bytes = False

    # -- asyncio.Protocol -------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.waiter is not None and not self.waiter.done():
            if self.in_body and not self.chunked and self.remaining < 0:
                self._finish()  # a body delimited by the end of the connection
            else:
                what = "mid-response" if self.got_bytes else "before the response"
                self._fail(f"connection closed {what}" + (f": {exc}" if exc else ""))
        self.pool._discard(self)

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        if self.waiter is None or self.waiter.done():
            self._abort()  # bytes nobody asked for: the connection is out of step
            return
        self.got_bytes = True
        if not self.in_body:
            self.head += data
            end = self.head.find(b"\r\n\r\n")
            if end < 0:
                if len(self.head) > 65_536:
                    self._fail("response headers too large")
                return
            rest = bytes(self.head[end + 4 :])
            if not self._parse_head(bytes(self.head[:end])):
                return
            self.in_body = True
            if not rest and not self._body_done():
                return
            data = rest
        self._feed(data, now)

    # -- parsing ------------------------------------------------------------------------------------

    def _parse_head(self, head: bytes) -> bool:
        lines = head.split(b"\r\n")
        parts = lines[0].split(None, 2)
        try:
            if not parts[0].startswith(b"HTTP/"):
                raise ValueError
            self.reply.status = int(parts[1])
        except (IndexError, ValueError):
            self._fail(f"malformed status line {lines[0][:100]!r}")
            return False
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            value = value.strip().lower()
            if name == b"transfer-encoding":
                self.chunked = b"chunked" in value
            elif name == b"content-length":
                try:
                    self.remaining = int(value)
                except ValueError:
                    self._fail("malformed Content-Length")
                    return False
            elif name == b"connection":
                self.keep_alive = b"close" not in value
        if self.chunked:
            self.remaining = -1
        elif self.remaining < 0:
            self.keep_alive = False  # delimited by the end of the connection
        if self.reply.status != 200:
            self.sink = None  # an error body is read whole, never as events
        return True

    def _body_done(self) -> bool:
        """A body of Content-Length 0 is complete at the end of the headers."""
        if not self.chunked and self.remaining == 0:
            self._finish()
            return True
        return False

    def _feed(self, data: bytes, now: float) -> None:
        if not self.chunked:
            if self.remaining >= 0:
                data = data[: self.remaining]
                self.remaining -= len(data)
            if self._payload(data, now) and self.remaining == 0 and self.waiter is not None:
                self._finish()
            return
        # chunked: the payload pieces of this read are gathered and handed on at once
        raw = self.raw + data if self.raw else data
        n = len(raw)
        pos = 0
        left = self.chunk_left
        pieces: list[bytes] = []
        last = False
        while True:
            if left > 0:
                end = pos + left
                if end > n:
                    pieces.append(raw[pos:])
                    left = end - n
                    pos = n
                    break
                pieces.append(raw[pos:end])
                pos = end
                left = -2
            if left == -2:  # the CRLF after a chunk's data
                if n - pos < 2:
                    break
                pos += 2
                left = 0
            eol = raw.find(b"\r\n", pos)
            if eol < 0:
                break
            try:
                size = int(raw[pos:eol], 16)
            except ValueError:
                try:  # chunk extensions (";name=value") are allowed and ignored
                    size = int(raw[pos:eol].split(b";", 1)[0], 16)
                except ValueError:
                    self._fail(f"malformed chunk size {raw[pos:eol][:20]!r}")
                    return
            pos = eol + 2
            if size == 0:
                last = True  # trailers (none expected) would follow; the exchange is over either way
                break
            left = size
        self.chunk_left = left
        self.raw = raw[pos:] if pos < n else b""
        if pieces and not self._payload(pieces[0] if len(pieces) == 1 else b"".join(pieces), now):
            return
        if last and self.waiter is not None:
            self._finish()

    def _payload(self, data: bytes, now: float) -> bool:
        """Body bytes: split into SSE events for a sink, else kept. False once the exchange is over."""
        sink = self.sink
        if sink is None:
            if len(self.body) < MAX_BODY:
                self.body += data
            return True
        text = self.events + data if self.events else data
        if b"\r" in text:
            text = text.replace(b"\r\n", b"\n")
        events = text.split(b"\n\n")
        self.events = events.pop()  # an event not complete yet (usually b"")
        if not events:
            return True
        payloads: list[bytes] = []
        for event in events:
            if event[:6] == b"data: " and b"\n" not in event:
                payloads.append(event[6:])
            else:
                for line in event.split(b"\n"):
                    if line.startswith(b"data:"):
                        payloads.append(line[5:].strip())
        if payloads and not sink(payloads, now):
            self.reply.stopped = True
            self._finish()
            return False
        return True

    # -- ending an exchange -------------------------------------------------------------------------

    def _finish(self) -> None:
        waiter = self.waiter
        reply = self.reply
        reply.body = bytes(self.body)
        # a response cut short by its reader leaves unread bytes on the wire: never reuse that
        reusable = self.keep_alive and not reply.stopped and not self.closed
        self._reset()
        if not reusable:
            self._abort()
        else:
            self.pool._release(self)
        if waiter is not None and not waiter.done():
            waiter.set_result(reply)

    def _fail(self, error: str) -> None:
        waiter = self.waiter
        reply = self.reply
        reply.error = error
        reply.body = bytes(self.body)
        self._reset()
        self._abort()
        if waiter is not None and not waiter.done():
            waiter.set_result(reply)

    def _abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            try:
                self.transport.abort()
            except RuntimeError:
                pass  # its event loop is closed already: so is the socket
        self.pool._discard(self)

    def timeout(self, seconds: float) -> None:
        self._fail(f"timed out after {seconds:g} s")


class Pool:
    """Keep-alive connections to one origin, for one event loop. Idle connections are reused
    last-in first-out; a connection is opened whenever none is idle."""

    def __init__(self, base_url: str, connect_timeout_s: float = 10.0) -> None:
        self.origin = Origin.parse(base_url)
        self.connect_timeout_s = connect_timeout_s
        self._idle: list[_Connection] = []
        self._all: set[_Connection] = set()
        self._ssl = ssl.create_default_context() if self.origin.tls else None

    def _release(self, conn: _Connection) -> None:
        if not conn.closed:
            self._idle.append(conn)

    def _discard(self, conn: _Connection) -> None:
        self._all.discard(conn)
        if conn in self._idle:
            self._idle.remove(conn)

    async def _open(self) -> _Connection:
        loop = asyncio.get_running_loop()
        _, conn = await asyncio.wait_for(
            loop.create_connection(
                lambda: _Connection(self), self.origin.host, self.origin.port, ssl=self._ssl
            ),
            self.connect_timeout_s,
        )
        self._all.add(conn)
        return conn

    async def _acquire(self) -> _Connection:
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed:
                return conn
        return await self._open()

    async def prefill(self, n: int) -> None:
        """Open connections until ``n`` are idle, so that the window's first requests do not pay
        for connecting (a failure here is left for the requests themselves to meet)."""
        missing = n - len([c for c in self._idle if not c.closed])
        if missing <= 0:
            return
        opened = await asyncio.gather(*(self._open() for _ in range(missing)), return_exceptions=True)
        for conn in opened:
            if isinstance(conn, _Connection):
                self._release(conn)

    def head(self, method: str, path: str, headers: dict[str, str], length: int) -> bytes:
        """The request line and headers, for a body of ``length`` bytes."""
        lines = [f"{method} {self.origin.prefix}{path} HTTP/1.1", f"Host: {self.origin.host_header}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        if method == "POST":
            lines += ["Content-Type: application/json", f"Content-Length: {length}"]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def request(
        self,
        request_bytes: bytes,
        timeout_s: float,
        sink: EventSink | None = None,
    ) -> Reply:
        """Send ``request_bytes`` (a whole request: :meth:`head` plus body) and wait for the response.
        With ``sink``, a 200 response's body is handed over as SSE events; otherwise it is kept in
        ``Reply.body``. Never raises (cancellation aside)."""
        loop = asyncio.get_running_loop()
        try:
            conn = await self._acquire()
        except (OSError, TimeoutError, ssl.SSLError) as e:
            return Reply(error=f"connect failed: {type(e).__name__}: {e}"[:300])
        waiter: asyncio.Future[Reply] = loop.create_future()
        conn.waiter = waiter
        conn.sink = sink
        timer = loop.call_later(timeout_s, conn.timeout, timeout_s)
        try:
            assert conn.transport is not None
            conn.transport.write(request_bytes)
            return await waiter
        except asyncio.CancelledError:
            conn._abort()
            raise
        finally:
            timer.cancel()

    async def get(self, path: str, headers: dict[str, str], timeout_s: float) -> Reply:
        return await self.request(self.head("GET", path, headers, 0), timeout_s)

    def close(self) -> None:
        for conn in list(self._all):
            conn._abort()
        self._idle.clear()
        self._all.clear()
