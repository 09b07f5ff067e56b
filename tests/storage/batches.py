"""Builds valid v2 record batches for storage tests (uncompressed, minimal records).

A stand-in for the records package's builder: storage only reads batch headers, so tests
need well-formed batches with chosen offsets, timestamps and attributes, nothing more.
"""

from __future__ import annotations

import os

from spark_log.records.batch_header import HEADER, HEADER_SIZE, LOG_OVERHEAD, write_crc

DEFAULT_TS = 1_700_000_000_000


def _varint(value: int) -> bytes:
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = zigzag & 0x7F
        zigzag >>= 7
        if zigzag:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _record(offset_delta: int, ts_delta: int, key: bytes | None, value: bytes) -> bytes:
    body = b"\x00" + _varint(ts_delta) + _varint(offset_delta)
    body += _varint(-1) if key is None else _varint(len(key)) + key
    body += _varint(len(value)) + value + _varint(0)
    return _varint(len(body)) + body


def make_batch(records: int = 1, *, base_offset: int = 0, timestamp: int = DEFAULT_TS,
               timestamps: list[int] | None = None, value_size: int = 8,
               key: bytes | None = b"k", attributes: int = 0, leader_epoch: int = -1,
               producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
               last_offset_delta: int | None = None, records_count: int | None = None,
               max_timestamp: int | None = None) -> bytes:
    """One batch of `records` records; overrides let tests break single header rules."""
    stamps = timestamps or [timestamp] * records
    payload = b"".join(
        _record(i, ts - stamps[0], key, bytes([i % 256]) * value_size)
        for i, ts in enumerate(stamps))
    size = HEADER_SIZE + len(payload)
    buf = bytearray(size)
    HEADER.pack_into(
        buf, 0, base_offset, size - LOG_OVERHEAD, leader_epoch, 2, 0, attributes,
        records - 1 if last_offset_delta is None else last_offset_delta,
        stamps[0], max(stamps) if max_timestamp is None else max_timestamp,
        producer_id, producer_epoch, base_sequence,
        records if records_count is None else records_count)
    buf[HEADER_SIZE:] = payload
    write_crc(buf, 0, size)
    return bytes(buf)


def batch_of_size(size: int, **kwargs: object) -> bytes:
    """A one-record batch of exactly `size` bytes (size >= 80)."""
    probe = make_batch(1, value_size=0, **kwargs)  # type: ignore[arg-type]
    value_size = size - len(probe)
    batch = make_batch(1, value_size=value_size, **kwargs)  # type: ignore[arg-type]
    grow = size - len(batch)  # the value length varint may have grown by a byte or two
    if grow:
        batch = make_batch(1, value_size=value_size + grow, **kwargs)  # type: ignore[arg-type]
    assert len(batch) == size, (len(batch), size)
    return batch


def flip_byte(path: str | os.PathLike[str], position: int) -> None:
    """Damage one byte of a file in place (every bit of it changes)."""
    with open(path, "r+b") as f:
        f.seek(position)
        byte = f.read(1)
        f.seek(position)
        f.write(bytes([byte[0] ^ 0xFF]))
