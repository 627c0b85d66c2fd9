"""Network faults for tests: a loopback TCP forwarder that can cut every connection (a database
server restarting, a flapping link) and come back on the same port."""

from __future__ import annotations

import socket
import threading


class TcpProxy:
    """A loopback TCP forwarder that can be stopped (every connection cut, like a server restart)
    and started again on the same port."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self._running = False
        self._socks: list[socket.socket] = []
        self._lock = threading.Lock()

    def start(self) -> TcpProxy:
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._listener.settimeout(0.05)
        self._running = True
        threading.Thread(target=self._accept, args=(self._listener,), daemon=True).start()
        return self

    def stop(self) -> None:
        self._running = False
        self._listener.close()
        with self._lock:
            socks, self._socks = self._socks, []
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def _accept(self, listener: socket.socket) -> None:
        while self._running:
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(None)
            upstream = socket.create_connection(self.target)
            with self._lock:
                self._socks += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


class SilentServer:
    """A loopback TCP server that accepts every connection and never answers (a database server hung
    after accept, a proxy in front of a dead one): a client waits until its own timeout."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=128)
        self.port = self._listener.getsockname()[1]
        self._held: list[socket.socket] = []
        self._running = True
        self._listener.settimeout(0.05)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while self._running:
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self._held.append(conn)  # held open, never read or written

    def close(self) -> None:
        self._running = False
        self._listener.close()
        for s in self._held:
            s.close()

    def __enter__(self) -> SilentServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
