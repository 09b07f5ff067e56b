"""Compression of a batch's records section, framed exactly as Kafka frames each codec.

* gzip: a gzip stream (concatenated members are accepted, as Java's GZIPInputStream does).
* snappy: written in snappy-java's xerial framing, as the Java client writes it: the magic
  b"\\x82SNAPPY\\x00", version 1, compatible version 1 (int32 each), then blocks of a big-endian
  int32 length and a raw snappy block of at most 32 KiB input. Read: xerial framing (its version
  fields are ignored, as librdkafka and kafka-python do) or a single raw snappy block, which is
  what librdkafka writes.
* lz4: an LZ4 frame as Kafka's Lz4BlockOutputStream writes it (FLG 0x60: version 1, independent
  blocks, no checksums; BD 0x40: 64 KiB blocks; incompressible blocks stored raw). Read: any
  frame Kafka's Lz4BlockInputStream accepts; dependent blocks, reserved bits or a block size code
  outside 4..7 are rejected as Kafka rejects them.
* zstd: zstd frames, with or without a content size (streaming encoders omit it).

Decompression never allocates more than `max_size` (plus a small constant): output goes into
buffers of bounded size and a stream that would exceed `max_size` raises CorruptRecordError,
so a decompression bomb costs at most `max_size` of memory.
"""

from __future__ import annotations

import struct

import cramjam

from .batch_header import Compression
from .errors import CorruptRecordError

DEFAULT_MAX_DECOMPRESSED_SIZE = 256 * 1024 * 1024

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK_INPUT = 32 * 1024
_SNAPPY_MAX_RATIO = 22  # a 3-byte copy op yields at most 64 bytes
_INT32 = struct.Struct(">i")

_LZ4_MAGIC = b"\x04\x22\x4d\x18"
# Magic, FLG, BD and the header checksum byte (xxh32(FLG BD) >> 8 & 0xff) Kafka writes.
_LZ4_KAFKA_HEADER = _LZ4_MAGIC + b"\x60\x40\x82"
_LZ4_BLOCK_INPUT = 64 * 1024
_LZ4_UNCOMPRESSED_BIT = 0x80000000
_LZ4_DEFAULT_LEVEL = 9  # Kafka's compression.lz4.level default: the fast compressor
_UINT32_LE = struct.Struct("<I")

_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_ZSTD_DEFAULT_LEVEL = 3  # Kafka's compression.zstd.level default
_GZIP_DEFAULT_LEVEL = 6  # Java's Deflater.DEFAULT_COMPRESSION

_MIN_GUESS = 64 * 1024
# cramjam's error when decompress_into runs out of output buffer (Rust's io::ErrorKind::WriteZero);
# tests pin it, since growing the buffer depends on recognising it.
_BUFFER_FULL = "failed to write whole buffer"
_GROWTH = 4
_DEFLATE_MAX_RATIO = 1032
_ZSTD_TRUSTED_RATIO = 64  # a declared content size above this ratio is grown into, not trusted


def compress(
    codec: Compression, data: bytes | bytearray | memoryview, *, level: int | None = None
) -> bytes:
    """Compress a records section with `codec`, framed as Kafka's Java client frames it.

    `level` follows Kafka's compression.<codec>.level configs; None takes Kafka's default.
    Snappy has no levels.
    """
    if codec == Compression.NONE:
        return bytes(data)
    if codec == Compression.GZIP:
        return bytes(cramjam.gzip.compress(data, level=_or(level, _GZIP_DEFAULT_LEVEL)))
    if codec == Compression.SNAPPY:
        return _xerial_compress(memoryview(data))
    if codec == Compression.LZ4:
        return _lz4_kafka_compress(memoryview(data), _or(level, _LZ4_DEFAULT_LEVEL))
    if codec == Compression.ZSTD:
        return bytes(cramjam.zstd.compress(data, level=_or(level, _ZSTD_DEFAULT_LEVEL)))
    raise ValueError(f"unknown compression codec {codec!r}")


def _or(level: int | None, default: int) -> int:
    return default if level is None else level


def decompress(
    codec: Compression,
    data: bytes | bytearray | memoryview,
    *,
    max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> bytes:
    """Decompress a records section; CorruptRecordError if it is malformed or would inflate to
    more than `max_size` bytes (ValueError for a codec id that is not a Compression)."""
    name = Compression(codec).name.lower()
    try:
        if codec == Compression.NONE:
            _check_size(len(data), max_size)
            return bytes(data)
        if codec == Compression.SNAPPY:
            return _snappy_decompress(data, max_size)
        if codec == Compression.GZIP:
            return _bounded(cramjam.gzip.decompress_into, data, _gzip_guess(data), max_size)
        if codec == Compression.LZ4:
            frame, guess = _lz4_frame(memoryview(data))
            return _bounded(cramjam.lz4.decompress_into, frame, guess, max_size)
        return _bounded(cramjam.zstd.decompress_into, data, _zstd_guess(data), max_size)
    except CorruptRecordError as exc:
        raise CorruptRecordError(f"{name} records: {exc}") from None
    except (cramjam.DecompressionError, ValueError, struct.error) as exc:
        raise CorruptRecordError(f"{name} records: corrupt compressed data: {exc}") from None


def _check_size(size: int, max_size: int) -> None:
    if size > max_size:
        raise CorruptRecordError(f"decompressed size {size} exceeds the limit of {max_size} bytes")


def _bounded(decompress_into, data, guess: int, max_size: int) -> bytes:
    """Decompress into a buffer of `guess` bytes, growing it up to `max_size` while the output
    does not fit.

    The spare byte tells output of exactly `max_size` from output that exceeds it. Only cramjam's
    "output buffer full" error is retried; any other is corruption and raised at once, so bad
    input never makes us allocate up to the limit.
    """
    size = max(0, min(guess, max_size))
    while True:
        out = bytearray(size + 1)
        try:
            written = decompress_into(data, out)
        except cramjam.DecompressionError as exc:
            if _BUFFER_FULL not in str(exc):
                raise CorruptRecordError(f"corrupt compressed data: {exc}") from None
            if size >= max_size:
                raise CorruptRecordError(
                    f"decompresses to more than the limit of {max_size} bytes"
                ) from None
            size = min(max_size, max(size * _GROWTH, _MIN_GUESS))
            continue
        _check_size(written, max_size)
        return bytes(memoryview(out)[:written])


def _gzip_guess(data) -> int:
    """The gzip trailer's ISIZE (input size mod 2^32 of the last member) as a first guess,
    capped at what deflate can expand to, so a lying trailer cannot force a large buffer."""
    if len(data) >= 18:
        return min(_UINT32_LE.unpack_from(data, len(data) - 4)[0], len(data) * _DEFLATE_MAX_RATIO)
    return _MIN_GUESS


def _zstd_guess(data) -> int:
    """The first frame's content size if its header declares one, else a multiple of the input."""
    fallback = max(_MIN_GUESS, len(data) * 8)
    if len(data) < 6 or bytes(data[:4]) != _ZSTD_MAGIC:
        return fallback
    descriptor = data[4]
    single_segment = descriptor & 0x20
    fcs_size = (1 if single_segment else 0, 2, 4, 8)[descriptor >> 6]
    if fcs_size == 0:
        return fallback
    start = 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[descriptor & 0x03]
    if len(data) < start + fcs_size:
        return fallback
    size = int.from_bytes(data[start : start + fcs_size], "little") + (256 if fcs_size == 2 else 0)
    return min(size, max(fallback, len(data) * _ZSTD_TRUSTED_RATIO))


def _xerial_compress(data: memoryview) -> bytes:
    out = bytearray(_XERIAL_HEADER)
    for start in range(0, len(data), _XERIAL_BLOCK_INPUT):
        block = cramjam.snappy.compress_raw(data[start : start + _XERIAL_BLOCK_INPUT])
        out += _INT32.pack(len(block))
        out += block
    return bytes(out)


def _snappy_decompress(data, max_size: int) -> bytes:
    view = memoryview(data)
    if bytes(view[:8]) != _XERIAL_MAGIC:
        _check_size(_snappy_block_size(view), max_size)
        return bytes(cramjam.snappy.decompress_raw(view))
    if len(view) < len(_XERIAL_HEADER):
        raise CorruptRecordError("xerial snappy header truncated")
    blocks, total, pos = [], 0, len(_XERIAL_HEADER)
    while pos < len(view):
        if len(view) - pos < 4:
            raise CorruptRecordError(f"xerial block length truncated at byte {pos}")
        (length,) = _INT32.unpack_from(view, pos)
        pos += 4
        if length < 0 or length > len(view) - pos:
            raise CorruptRecordError(f"xerial block of {length} bytes at byte {pos} overruns")
        block = view[pos : pos + length]
        pos += length
        total += _snappy_block_size(block) if length else 0
        _check_size(total, max_size)  # before inflating anything
        blocks.append(block)
    return b"".join(bytes(cramjam.snappy.decompress_raw(block)) for block in blocks if block)


def _snappy_block_size(block) -> int:
    """The size a raw snappy block declares, refused if the block could not expand to it (the
    decoder allocates the declared size before decoding)."""
    size = cramjam.snappy.decompress_raw_len(block)
    if size > len(block) * _SNAPPY_MAX_RATIO:
        raise CorruptRecordError(
            f"snappy block of {len(block)} bytes claims {size} bytes, more than snappy expands to"
        )
    return size


def _lz4_kafka_compress(data: memoryview, level: int) -> bytes:
    mode = "default" if level == _LZ4_DEFAULT_LEVEL else "high_compression"
    out = bytearray(_LZ4_KAFKA_HEADER)
    for start in range(0, len(data), _LZ4_BLOCK_INPUT):
        chunk = data[start : start + _LZ4_BLOCK_INPUT]
        block = cramjam.lz4.compress_block(chunk, mode=mode, compression=level, store_size=False)
        if len(block) >= len(chunk):  # incompressible: store the input, flagged uncompressed
            out += _UINT32_LE.pack(len(chunk) | _LZ4_UNCOMPRESSED_BIT)
            out += chunk
        else:
            out += _UINT32_LE.pack(len(block))
            out += block
    out += b"\x00\x00\x00\x00"  # EndMark
    return bytes(out)


def _lz4_frame(view: memoryview) -> tuple[memoryview, int]:
    """Check the frame descriptor as Kafka does and walk the blocks.

    Returns the frame (trailing bytes after its EndMark dropped, as Kafka ignores them) and an
    upper bound of its decompressed size. cramjam verifies the checksums when decoding.
    """
    if len(view) < 7:
        raise CorruptRecordError("lz4 frame header truncated")
    if bytes(view[:4]) != _LZ4_MAGIC:
        raise CorruptRecordError("not an lz4 frame (bad magic)")
    flg, bd = view[4], view[5]
    if flg & 0x03:
        raise CorruptRecordError("lz4 frame: reserved FLG bits must be 0")
    if not flg & 0x20:
        raise CorruptRecordError("lz4 frame: dependent block stream is unsupported")
    if flg >> 6 != 1:
        raise CorruptRecordError(f"lz4 frame: version {flg >> 6} is unsupported")
    if bd & 0x8F or not 4 <= (bd >> 4) & 7 <= 7:
        raise CorruptRecordError(f"lz4 frame: bad block descriptor {bd:#04x}")
    max_block = 1 << (2 * ((bd >> 4) & 7) + 8)
    block_checksum = 4 if flg & 0x10 else 0
    pos = 7 + (8 if flg & 0x08 else 0)
    bound = 0
    while True:
        if len(view) - pos < 4:
            raise CorruptRecordError(f"lz4 frame ended prematurely at byte {pos}")
        (word,) = _UINT32_LE.unpack_from(view, pos)
        pos += 4
        size = word & ~_LZ4_UNCOMPRESSED_BIT
        if size == 0:
            break
        if size > max_block:
            raise CorruptRecordError(f"lz4 block size {size} exceeds the maximum {max_block}")
        pos += size + block_checksum
        bound += size if word & _LZ4_UNCOMPRESSED_BIT else max_block
    if flg & 0x04:
        pos += 4  # content checksum
    if pos > len(view):
        raise CorruptRecordError("lz4 frame ended prematurely")
    return view[:pos], bound
