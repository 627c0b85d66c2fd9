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

From a shell: ``python -m nova_search.testing.standin --port 8000 --tokens-per-chunk 3``.

Its modules: options (StandinOptions, StandinStats), wire (HTTP/1.1), app (StandinApp), serving
(StandinServer, standin_server, serve), __main__ (the command line). This package exposes the public
names on purpose: tests and benchmarks import them from ``nova_search.testing.standin``.
"""

from nova_search.testing.standin.app import StandinApp
from nova_search.testing.standin.options import StandinOptions, StandinStats
from nova_search.testing.standin.serving import StandinServer, serve, standin_server

__all__ = ["StandinApp", "StandinOptions", "StandinServer", "StandinStats", "serve", "standin_server"]
