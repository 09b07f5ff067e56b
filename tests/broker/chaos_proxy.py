"""A loopback TCP proxy for tests that cuts connections at random points.

Each accepted connection is piped to the target with a random byte budget per direction
(requests: between `min_bytes` and `max_bytes`; responses: within `response_bytes`). When the
client's budget runs out, the rest of its request is not forwarded; when the broker's runs
out, the response chunk is dropped — a request that was written but whose answer never
arrives, which is what makes an idempotent producer retry a batch the log already holds.
Either way both sockets are then closed. The broker must advertise the proxy's address so
clients reconnect through it. Test code only; one thread per direction per connection.
"""

from __future__ import annotations

import contextlib
import random
import socket
import threading


class ChaosProxy:
    def __init__(self, min_bytes: int, max_bytes: int, seed: int = 7,
                 response_bytes: tuple[int, int] | None = None) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.target: tuple[str, int] | None = None
        self.min_bytes, self.max_bytes = min_bytes, max_bytes
        self.response_bytes = response_bytes or (min_bytes, max_bytes)
        self.random = random.Random(seed)
        self.cuts = 0
        self._closing = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, target: tuple[str, int]) -> ChaosProxy:
        self.target = target
        self._thread.start()
        return self

    def close(self) -> None:
        self._closing = True
        self.listener.close()
        with self._lock:
            for s in self._sockets:
                with contextlib.suppress(OSError):
                    s.close()

    def _accept(self) -> None:
        while not self._closing:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            assert self.target is not None
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                budgets = [self.random.randint(self.min_bytes, self.max_bytes),
                           self.random.randint(*self.response_bytes)]
                self._sockets += [client, upstream]
            pair = _Pair(self, client, upstream)
            threading.Thread(target=pair.pipe, args=(client, upstream, budgets[0], True),
                             daemon=True).start()
            threading.Thread(target=pair.pipe, args=(upstream, client, budgets[1], False),
                             daemon=True).start()


class _Pair:
    def __init__(self, proxy: ChaosProxy, client: socket.socket, upstream: socket.socket
                 ) -> None:
        self.proxy, self.client, self.upstream = proxy, client, upstream

    def pipe(self, source: socket.socket, sink: socket.socket, budget: int,
             from_client: bool) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                if len(data) >= budget:  # requests: forward part, responses: drop; then cut
                    if from_client:
                        sink.sendall(data[:budget])
                    self.proxy.cuts += 1
                    break
                budget -= len(data)
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (self.client, self.upstream):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                with contextlib.suppress(OSError):
                    s.close()
