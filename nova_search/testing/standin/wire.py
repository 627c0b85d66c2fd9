"""The stand-in's HTTP/1.1: one request read off a stream, response heads, JSON bodies, SSE chunks,
OpenAI-style usage and error objects."""

from __future__ import annotations

import asyncio
import json

REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    411: "Length Required",
    500: "Internal Server Error",
}


class BadRequest(Exception):
    pass


class Request:
    __slots__ = ("method", "path", "headers", "body")

    def __init__(self, method: str, path: str, headers: dict[str, str], body: bytes) -> None:
        self.method, self.path, self.headers, self.body = method, path, headers, body

    @property
    def keep_alive(self) -> bool:
        return self.headers.get("connection", "").lower() != "close"


async def read_request(reader: asyncio.StreamReader) -> Request | None:
    line = await reader.readline()
    if not line:
        return None
    parts = line.decode("latin-1").split()
    if len(parts) != 3:
        raise BadRequest("malformed request line")
    method, path, _version = parts
    headers: dict[str, str] = {}
    while True:
        h = await reader.readline()
        if h in (b"\r\n", b"\n", b""):
            break
        name, _, value = h.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        raise BadRequest("chunked request bodies are not supported; send Content-Length")
    try:
        length = int(headers.get("content-length", "0"))
    except ValueError:
        raise BadRequest("bad Content-Length") from None
    body = await reader.readexactly(length) if length else b""
    return Request(method, path, headers, body)


def response_head(status: int, ctype: str, length: int | None, keep_alive: bool) -> bytes:
    lines = [
        f"HTTP/1.1 {status} {REASONS.get(status, 'Unknown')}",
        f"content-type: {ctype}",
        "server: nova-standin",
    ]
    lines.append("transfer-encoding: chunked" if length is None else f"content-length: {length}")
    if not keep_alive:
        lines.append("connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def write_body(writer: asyncio.StreamWriter, status: int, body: bytes, ctype: str, keep: bool) -> None:
    writer.write(response_head(status, ctype, len(body), keep) + body)


def write_json(writer: asyncio.StreamWriter, status: int, obj: object, keep_alive: bool) -> None:
    write_body(writer, status, json.dumps(obj).encode(), "application/json", keep_alive)


def sse_chunk(data: str) -> bytes:
    """One SSE event as one HTTP chunk."""
    payload = f"data: {data}\n\n".encode()
    return f"{len(payload):x}\r\n".encode() + payload + b"\r\n"


def usage_json(prompt: int, completion: int) -> str:
    return (
        f'{{"prompt_tokens":{prompt},"total_tokens":{prompt + completion},"completion_tokens":{completion}}}'
    )


def error_body(message: str, type_: str, code: int) -> dict[str, object]:
    return {"object": "error", "message": message, "type": type_, "param": None, "code": code}
