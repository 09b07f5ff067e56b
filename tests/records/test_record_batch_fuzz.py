"""Malformed input: mutated batches (bit flips, truncations, insertions, overwritten fields) either
decode or raise CorruptRecordError, never another exception, a hang or an out-of-bounds read."""

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from spark_log.records.batch_header import COMPRESSION_MASK, HEADER_SIZE, Compression, write_crc
from spark_log.records.compression import compress, decompress
from spark_log.records.errors import CorruptRecordError
from spark_log.records.record import Record
from spark_log.records.record_batch import BatchView, build_batch, decode_batch, iter_batches

from .strategies import compressions, record_lists

LIMIT = 1 << 20  # small decompression limit, so a mutated size cannot make a test slow


@st.composite
def mutations(draw, size: int):
    """A list of edits to a buffer of `size` bytes."""
    edit = st.one_of(
        st.tuples(st.just("flip"), st.integers(0, size - 1), st.integers(0, 7)),
        st.tuples(st.just("truncate"), st.integers(0, size - 1)),
        st.tuples(st.just("insert"), st.integers(0, size), st.binary(min_size=1, max_size=8)),
        st.tuples(st.just("delete"), st.integers(0, size - 1), st.integers(1, 8)),
        st.tuples(
            st.just("overwrite"), st.integers(0, size - 1), st.binary(min_size=1, max_size=5)
        ),
        st.tuples(
            st.just("int"),
            st.integers(0, max(0, size - 4)),
            st.sampled_from([-1, -(1 << 31), (1 << 31) - 1, 0, 1, 1000, 1 << 24]),
        ),
    )
    return draw(st.lists(edit, min_size=1, max_size=3))


def apply(buf: bytes, edits) -> bytes:
    out = bytearray(buf)
    for edit in edits:
        kind, pos = edit[0], min(edit[1], len(out))
        if kind == "flip" and pos < len(out):
            out[pos] ^= 1 << edit[2]
        elif kind == "truncate":
            del out[pos:]
        elif kind == "insert":
            out[pos:pos] = edit[2]
        elif kind == "delete":
            del out[pos : pos + edit[2]]
        elif kind == "overwrite":
            out[pos : pos + len(edit[2])] = edit[2]
        elif kind == "int" and pos + 4 <= len(out):
            struct.pack_into(">i", out, pos, edit[2])
    return bytes(out)


def decode_everything(buf: bytes) -> None:
    """Every read path over `buf`; each must succeed or raise CorruptRecordError."""
    for verify in (False, True):
        try:
            decoded = decode_batch(buf, verify_crc=verify, max_decompressed_size=LIMIT)
        except CorruptRecordError as exc:
            assert str(exc)
        else:
            assert len(decoded.records) == decoded.header.records_count
    try:
        view = BatchView(buf)
        list(view.offsets_and_keys(verify_crc=False, max_decompressed_size=LIMIT))
    except CorruptRecordError as exc:
        assert str(exc)
    try:
        for view in iter_batches(memoryview(buf)):
            view.decode(verify_crc=False, max_decompressed_size=LIMIT)
    except CorruptRecordError as exc:
        assert str(exc)


def with_payload(batch: bytes, payload: bytes) -> bytes:
    """`batch`'s header followed by `payload`, with length and CRC made consistent."""
    out = bytearray(batch[:HEADER_SIZE]) + payload
    struct.pack_into(">i", out, 8, len(out) - 12)
    write_crc(out, 0, len(out))
    return bytes(out)


def rebuild(batch: bytes, section: bytes) -> bytes:
    """`batch` with its records section replaced by `section`, compressed with the batch's
    codec, so only the records are malformed."""
    codec = Compression(batch[22] & COMPRESSION_MASK)
    return with_payload(batch, compress(codec, section) if codec else section)


@settings(max_examples=400, deadline=None)
@given(st.data(), record_lists(min_size=1, max_size=8), compressions)
def test_mutated_batches_decode_or_raise_corrupt_record_error(data, records, codec):
    batch = build_batch(records, compression=codec)
    decode_everything(apply(batch, data.draw(mutations(len(batch)))))


@settings(max_examples=400, deadline=None)
@given(st.data(), record_lists(min_size=1, max_size=8), compressions)
def test_mutated_records_sections_raise_corrupt_record_error(data, records, codec):
    batch = build_batch(records, compression=codec)
    section = decompress(codec, batch[HEADER_SIZE:]) if codec else batch[HEADER_SIZE:]
    decode_everything(rebuild(batch, apply(section, data.draw(mutations(len(section))))))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), compressions, st.integers(1, 5), st.booleans())
def test_garbage_records_raise_corrupt_record_error(garbage, codec, count, as_payload):
    batch = bytearray(build_batch([Record(0, 0, None, b"x")], compression=codec))
    struct.pack_into(">i", batch, 57, count)
    # Garbage as the compressed payload exercises the decompressors, as the section the parser.
    decode_everything(with_payload(batch, garbage) if as_payload else rebuild(batch, garbage))
