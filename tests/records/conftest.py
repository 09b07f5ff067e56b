"""Fixtures for the records tests."""

import cramjam
import kafka.codec
import kafka.record.default_records as kafka_records
import pytest


class _RawSnappy:
    """python-snappy's block API, which kafka-python's own xerial framing code calls."""

    @staticmethod
    def compress(data: bytes) -> bytes:
        return bytes(cramjam.snappy.compress_raw(data))

    @staticmethod
    def decompress(data: bytes) -> bytes:
        return bytes(cramjam.snappy.decompress_raw(data))


def _lz4_frame_encode(data: bytes) -> bytes:
    encoder = cramjam.lz4.Compressor(block_linked=False)  # LZ4F's own framing, not ours
    encoder.compress(data)
    return bytes(encoder.finish())


def _zstd_stream_encode(data: bytes) -> bytes:
    encoder = cramjam.zstd.Compressor()  # streaming: frames without a content size
    encoder.compress(data)
    return bytes(encoder.finish())


@pytest.fixture
def kafka_python_codecs(monkeypatch):
    """Give kafka-python its optional snappy/lz4/zstd codecs.

    kafka-python needs python-snappy, lz4 and zstandard for these codecs; they are not
    dependencies here, so their codec calls are served by cramjam. kafka-python keeps its own
    batch and record code and its own snappy xerial framing; LZ4 framing comes from the LZ4F
    library inside cramjam rather than our frame writer.
    """
    monkeypatch.setattr(kafka.codec, "snappy", _RawSnappy)
    monkeypatch.setattr(kafka.codec, "lz4", _lz4_frame_encode)
    monkeypatch.setattr(kafka.codec, "zstd", _zstd_stream_encode)
    monkeypatch.setattr(kafka_records, "lz4_encode", _lz4_frame_encode)
    monkeypatch.setattr(kafka_records, "lz4_decode", lambda d: bytes(cramjam.lz4.decompress(d)))
    monkeypatch.setattr(kafka_records, "zstd_encode", _zstd_stream_encode)
    monkeypatch.setattr(kafka_records, "zstd_decode", lambda d: bytes(cramjam.zstd.decompress(d)))
