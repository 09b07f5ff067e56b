"""A minimal HTTP endpoint on the node's event loop that serves `/metrics` to Prometheus.

It runs on the same loop as the broker and the quorum, so the scrape-time gauges read their
state without locks; anything but `GET /metrics` (or `/`) gets 404, and a request head over
8 KiB is dropped.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from spark_log.deadline import within

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

log = logging.getLogger(__name__)
MAX_HEAD = 8192


async def serve_metrics(registry: CollectorRegistry, host: str, port: int) -> asyncio.Server:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await within(10, reader.readuntil(b"\r\n\r\n"))
            if len(head) > MAX_HEAD:
                return
            method, _, rest = head.decode("latin-1").partition(" ")
            path = rest.partition(" ")[0].split("?")[0]
            if method == "GET" and path in ("/metrics", "/"):
                body = generate_latest(registry)
                status, ctype = "200 OK", CONTENT_TYPE_LATEST
            else:
                body, status, ctype = b"not found\n", "404 Not Found", "text/plain"
            writer.write(f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: "
                         f"{len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError,
                ConnectionError, UnicodeDecodeError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, host, port, limit=MAX_HEAD)
    log.info("Serving Prometheus metrics on http://%s:%d/metrics", host,
             server.sockets[0].getsockname()[1])
    return server
