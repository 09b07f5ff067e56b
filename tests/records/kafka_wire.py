"""Just enough Kafka client wire protocol, encoded with kio, to talk to librdkafka's mock
cluster on loopback: one request, one response, on a blocking socket."""

from __future__ import annotations

import io
import socket
import struct

from confluent_kafka import Producer
from kio.schema.request_header.v1.header import RequestHeader
from kio.schema.response_header.v0.header import ResponseHeader
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

_SIZE = struct.Struct(">i")


def mock_cluster_address(producer: Producer) -> tuple[str, int]:
    """Loopback address of the (single) broker of the producer's mock cluster."""
    broker = next(iter(producer.list_topics(timeout=10).brokers.values()))
    assert broker.host in ("127.0.0.1", "localhost", "::1"), broker.host
    return broker.host, broker.port


def round_trip(sock: socket.socket, request, response_type, correlation_id: int):
    """Send a non-flexible request (header v1) and return its decoded response."""
    header = RequestHeader(
        request_api_key=i16(request.__api_key__),
        request_api_version=i16(request.__version__),
        correlation_id=i32(correlation_id),
        client_id="records-tests",
    )
    buf = io.BytesIO()
    entity_writer(RequestHeader)(buf, header)
    entity_writer(type(request))(buf, request)
    sock.sendall(_SIZE.pack(len(buf.getvalue())) + buf.getvalue())
    (size,) = _SIZE.unpack(_recv_exactly(sock, 4))
    body = _recv_exactly(sock, size)
    response_header, pos = entity_reader(ResponseHeader)(body, 0)
    assert response_header.correlation_id == correlation_id
    response, _ = entity_reader(response_type)(body, pos)
    return response


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise EOFError("the broker closed the connection")
        data += chunk
    return bytes(data)
