"""Shared fixtures."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.support.standin import StandinOptions, StandinServer


@pytest.fixture
def standin() -> Iterator[Callable[..., StandinServer]]:
    """A factory: ``standin(tokens_per_chunk=3, ttft_s=0.05)`` starts a stand-in server on a free
    loopback port; every server it started is stopped when the test ends."""
    servers: list[StandinServer] = []

    def start(**options: object) -> StandinServer:
        server = StandinServer(StandinOptions(**options)).start()  # type: ignore[arg-type]
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()
