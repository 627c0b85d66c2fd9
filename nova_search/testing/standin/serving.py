"""Running a stand-in: on its own event loop in a daemon thread of the test (``StandinServer``,
``standin_server``), or as a process of its own (``serve``)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Iterator

from nova_search.testing.standin.app import StandinApp
from nova_search.testing.standin.options import StandinOptions, StandinStats


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
