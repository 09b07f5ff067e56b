"""What the tests of the hand-written request readers share: a mutated body decodes to what
kio decodes, or to ProtocolError naming the message."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spark_log.protocol.codec import decode_entity
from spark_log.protocol.errors import ProtocolError


def mutated(body: bytes, changes: list[tuple[int, int]], cut: int) -> bytes:
    data = bytearray(body)
    for position, value in changes:
        if data:
            data[position % len(data)] = value
    return bytes(data[:cut % (len(data) + 1)])


def assert_reads_as_kio(kio_type: type, body: bytes, decode: Callable[[bytes], Any],
                        ours: Callable[[Any], tuple], theirs: Callable[[Any], tuple],
                        name: str) -> None:
    """Whatever kio reads of `body`, `decode` reads the same; what it refuses, it refuses
    with a ProtocolError starting "malformed `name`"."""
    try:
        want = theirs(decode_entity(kio_type, body))
    except ProtocolError:
        want = None
    try:
        got = ours(decode(body))
    except ProtocolError as e:
        assert str(e).startswith(f"malformed {name}"), e
        got = None
    if want is not None:
        assert got == want
