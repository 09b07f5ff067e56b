"""Records-section compression: Kafka's framing per codec, both snappy framings, LZ4 frame rules
as Kafka applies them, zstd frames without a content size, and bounded decompression."""

import gzip
import os
import resource
import struct

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_log.records.batch_header import Compression
from spark_log.records.compression import compress, decompress
from spark_log.records.errors import CorruptRecordError

CODECS = list(Compression)
COMPRESSED = [c for c in Compression if c != Compression.NONE]
MIXED = os.urandom(100_000) + b"abcdefgh" * 40_000  # an incompressible and a compressible part
KAFKA_LZ4_HEADER = bytes.fromhex("04224d18604082")


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(CODECS), st.binary(max_size=5000))
def test_round_trip(codec, data):
    assert decompress(codec, compress(codec, data)) == data


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("level", [None, 1, 5])
def test_round_trip_large_and_mixed(codec, level):
    data = MIXED * 2
    assert decompress(codec, compress(codec, data, level=level)) == data


def test_snappy_writes_xerial_framing_with_32k_blocks():
    data = MIXED
    out = compress(Compression.SNAPPY, data)
    assert out[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    pos, inflated = 16, []
    while pos < len(out):
        (length,) = struct.unpack_from(">i", out, pos)
        inflated.append(bytes(cramjam.snappy.decompress_raw(out[pos + 4 : pos + 4 + length])))
        pos += 4 + length
    assert [len(b) for b in inflated[:-1]] == [32 * 1024] * (len(inflated) - 1)
    assert b"".join(inflated) == data


def test_snappy_reads_raw_blocks_as_librdkafka_writes_them():
    assert decompress(Compression.SNAPPY, bytes(cramjam.snappy.compress_raw(MIXED))) == MIXED


def test_snappy_reads_xerial_with_any_version_fields():
    # Some producers write the version fields little-endian; readers ignore them.
    framed = compress(Compression.SNAPPY, MIXED)
    odd = framed[:8] + struct.pack("<ii", 1, 1) + framed[16:]
    assert decompress(Compression.SNAPPY, odd) == MIXED


def test_lz4_writes_kafkas_frame():
    out = compress(Compression.LZ4, MIXED)
    assert out[:7] == KAFKA_LZ4_HEADER
    assert out[-4:] == b"\x00\x00\x00\x00"
    # An independent LZ4 frame decoder, which checks the header checksum, reads it.
    assert bytes(cramjam.lz4.decompress(out)) == MIXED


def test_lz4_stores_incompressible_blocks_raw():
    data = os.urandom(1000)
    out = compress(Compression.LZ4, data)
    (word,) = struct.unpack_from("<I", out, 7)
    assert word == 0x80000000 | len(data)
    assert out[11 : 11 + len(data)] == data


def test_lz4_reads_frames_with_block_checksums_and_content_checksum():
    encoder = cramjam.lz4.Compressor(content_checksum=True, block_linked=False)
    encoder.compress(MIXED)
    frame = bytes(encoder.finish())
    assert frame[4] & 0x14  # block or content checksum flags are set
    assert decompress(Compression.LZ4, frame) == MIXED


def test_lz4_ignores_bytes_after_the_end_mark_as_kafka_does():
    frame = compress(Compression.LZ4, MIXED)
    assert decompress(Compression.LZ4, frame + b"trailing") == MIXED


@pytest.mark.parametrize(
    ("flg_bd", "reason"),
    [
        (b"\x40\x40", "dependent block stream is unsupported"),
        (b"\x61\x40", "reserved FLG bits"),
        (b"\xa0\x40", "version 2 is unsupported"),
        (b"\x60\x30", "bad block descriptor"),
        (b"\x60\xc0", "bad block descriptor"),
    ],
)
def test_lz4_rejects_frames_kafka_rejects(flg_bd, reason):
    frame = compress(Compression.LZ4, b"x" * 100)
    with pytest.raises(CorruptRecordError, match=reason):
        decompress(Compression.LZ4, frame[:4] + flg_bd + frame[6:])


def test_lz4_checks_the_header_checksum():
    frame = compress(Compression.LZ4, b"x" * 100)
    with pytest.raises(CorruptRecordError, match="lz4"):
        decompress(Compression.LZ4, frame[:6] + b"\x83" + frame[7:])


def test_zstd_reads_frames_without_a_content_size():
    encoder = cramjam.zstd.Compressor()
    encoder.compress(MIXED * 3)
    frame = bytes(encoder.finish())
    assert frame[4] & 0xC0 == 0 and not frame[4] & 0x20  # no Frame_Content_Size field
    assert decompress(Compression.ZSTD, frame) == MIXED * 3


def test_gzip_reads_concatenated_members_as_javas_stream_does():
    data = gzip.compress(b"first ") + gzip.compress(b"second")
    assert decompress(Compression.GZIP, data) == b"first second"


def _bomb(codec: Compression, size: int) -> bytes:
    """A small input that inflates to `size` zero bytes."""
    if codec == Compression.LZ4:
        block = bytes(cramjam.lz4.compress_block(bytes(65536), store_size=False))
        return (
            KAFKA_LZ4_HEADER + (struct.pack("<I", len(block)) + block) * (size // 65536) + bytes(4)
        )
    if codec == Compression.SNAPPY:
        return bytes(cramjam.snappy.compress_raw(bytes(size)))
    unit = compress(codec, bytes(16 << 20))
    return unit * (size // (16 << 20))  # gzip members and zstd frames concatenate


@pytest.mark.parametrize("codec", COMPRESSED)
def test_decompression_bomb_raises_without_inflating(codec):
    bomb = _bomb(codec, 1 << 30 if codec != Compression.SNAPPY else 64 << 20)
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(CorruptRecordError, match="limit of 1048576 bytes"):
        decompress(codec, bomb, max_size=1 << 20)
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before
    assert grown_kib < 64 * 1024


@pytest.mark.parametrize("codec", COMPRESSED)
def test_output_of_exactly_the_limit_is_accepted(codec):
    data = MIXED[:50_000]
    packed = compress(codec, data)
    assert decompress(codec, packed, max_size=len(data)) == data
    with pytest.raises(CorruptRecordError, match="limit"):
        decompress(codec, packed, max_size=len(data) - 1)


@pytest.mark.parametrize("codec", COMPRESSED)
def test_garbage_and_truncation_raise_corrupt_record_error(codec):
    packed = compress(codec, MIXED)
    for bad in (b"", b"\x00" * 40, os.urandom(200), packed[: len(packed) // 2], packed[:-3]):
        with pytest.raises(CorruptRecordError, match=codec.name.lower()):
            decompress(codec, bad)


def test_unknown_codec_is_rejected_when_compressing():
    with pytest.raises(ValueError, match="unknown compression codec"):
        compress(7, b"data")


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.ZSTD])
def test_output_beyond_the_first_size_guess_is_grown_into(codec):
    # Streaming zstd frames declare no size and a 2-member gzip's trailer gives only the last
    # member's, so the output buffer must grow: this pins cramjam's "buffer full" error.
    if codec == Compression.GZIP:
        packed = gzip.compress(bytes(8 << 20)) + gzip.compress(b"tail")
    else:
        encoder = cramjam.zstd.Compressor()
        encoder.compress(bytes(8 << 20))
        packed = bytes(encoder.finish())
    out = decompress(codec, packed)
    assert len(out) == (8 << 20) + (4 if codec == Compression.GZIP else 0)


def test_corrupt_input_fails_without_growing_the_buffer_to_the_limit():
    # A zstd frame asking for a 1 GiB window: the decoder refuses it outright.
    frame = b"\x28\xb5\x2f\xfd\x00" + bytes([20 << 3]) + (1 << 3 | 1).to_bytes(3, "little") + b"x"
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(CorruptRecordError, match="corrupt compressed data"):
        decompress(Compression.ZSTD, frame, max_size=512 << 20)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before < 64 * 1024


def test_snappy_block_claiming_more_than_it_can_expand_to_is_refused():
    claim = b"\x80\x80\x80\x40"  # a varint preamble of 128 MiB, followed by 6 bytes
    with pytest.raises(CorruptRecordError, match="claims 134217728 bytes"):
        decompress(Compression.SNAPPY, claim + b"\x00" * 6)
