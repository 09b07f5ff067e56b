"""Partition sizes on disk, asked with DescribeLogDirs (as kafka-log-dirs.sh asks them).

librdkafka has no DescribeLogDirs, so this small blocking client sends it with the project's
protocol codecs to each broker address given (every broker answers for its own replicas; the
largest size of a partition's replicas is kept). It is best effort: a broker that cannot be
reached, does not know the API or answers an error contributes nothing, and the caller shows
the size as unknown.
"""

from __future__ import annotations

import contextlib
import socket
import struct
from collections.abc import Iterable

from spark_log.protocol import ProtocolError, decode_response, encode_request, spec_for
from spark_log.protocol.api_keys import ApiKey
from spark_log.protocol.entity_build import build

VERSION = 1  # supported by every Kafka release since 2.0
TIMEOUT_S = 10.0
CLIENT_ID = "spark-log-log-dirs"
_SIZE = struct.Struct(">i")

TopicPartition = tuple[str, int]


def partition_sizes(addresses: str | Iterable[str], topics: Iterable[str] | None = None
                    ) -> dict[TopicPartition, int]:
    """{(topic, partition): size in bytes} for `topics` (None: all) on the brokers at
    `addresses` ("host:port", or a comma-separated bootstrap string)."""
    if isinstance(addresses, str):
        addresses = [a for a in addresses.split(",") if a.strip()]
    wanted = None if topics is None else sorted(set(topics))
    sizes: dict[TopicPartition, int] = {}
    for address in addresses:
        with contextlib.suppress(OSError, ProtocolError, ValueError, AssertionError):
            for tp, size in _ask(address.strip().rpartition("://")[2], wanted).items():
                sizes[tp] = max(size, sizes.get(tp, -1))
    return sizes


def _ask(address: str, topics: list[str] | None) -> dict[TopicPartition, int]:
    spec = spec_for(ApiKey.DESCRIBE_LOG_DIRS)
    assert spec is not None
    # A null topic list asks for every topic; partitions must be named, so ask for all topics
    # and filter here.
    request = build(spec.request_type(VERSION), {"topics": None})
    host, _, port = address.rpartition(":")
    with socket.create_connection((host.strip("[]"), int(port)), timeout=TIMEOUT_S) as sock:
        sock.sendall(encode_request(1, CLIENT_ID, request))
        size = _SIZE.unpack(_read(sock, 4))[0]
        correlation, response = decode_response(_read(sock, size), ApiKey.DESCRIBE_LOG_DIRS,
                                                VERSION)
    assert correlation == 1
    sizes: dict[TopicPartition, int] = {}
    for result in response.results:
        if result.error_code != 0:
            continue
        for topic in result.topics:
            if topics is not None and topic.name not in topics:
                continue
            for p in topic.partitions:
                if not p.is_future_key:
                    sizes[(topic.name, p.partition_index)] = int(p.partition_size)
    return sizes


def _read(sock: socket.socket, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
