"""Micro benchmark of the protocol hot paths; prints absolute times and ratios, not a test.

Produce decode: a ProduceRequest v9 carrying 1 MiB of records through `parse_request` +
`decode_request_body` (kio's native reader), against a plain 1 MiB bytes copy, the floor any
decoder that hands out `bytes` pays. Fetch encode: a FetchResponse v12 with 1 MiB of records
through kio's writer (`encode_response`) against `encode_fetch_response`, which leaves the
records in place. Also times a small Metadata request, a many-partition fetch response, and
framing a 1 MiB frame fed in 64 KiB reads.

Usage, from the repository root: PYTHONPATH=. python bench/protocol_codec.py [--repeat N]
"""

from __future__ import annotations

import argparse
import datetime
import os
import time
from collections.abc import Callable

from kio.schema.fetch.v12.response import FetchableTopicResponse, FetchResponse, PartitionData
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

from spark_log.protocol import (
    ErrorCode,
    FrameDecoder,
    decode_request_body,
    encode_fetch_response,
    encode_request,
    encode_response,
    parse_request,
)

MIB = 1 << 20


class FileSlice:
    """What storage hands the encoder: a size, no bytes."""

    def __init__(self, size: int) -> None:
        self.size = size


def best_of(repeat: int, fn: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def produce_frame(records: bytes) -> memoryview:
    partition = PartitionProduceData(index=0, records=records)
    request = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=30),
        topic_data=(TopicProduceData(name="events", partition_data=(partition,)),),
    )
    return memoryview(encode_request(1, "bench", request))[4:]


def fetch_response(records: object, partitions: int = 1) -> FetchResponse:
    parts = tuple(
        PartitionData(
            partition_index=index,
            error_code=ErrorCode.none,
            high_watermark=1000,
            aborted_transactions=None,
            records=records,
        )
        for index in range(partitions)
    )
    return FetchResponse(
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        responses=(FetchableTopicResponse(topic="events", partitions=parts),),
    )


def decode(frame: memoryview) -> object:
    header, body = parse_request(frame)
    return decode_request_body(header, body)


def report(name: str, seconds: float, baseline: float | None = None) -> None:
    ratio = f"  ratio {seconds / baseline:6.2f}" if baseline else ""
    print(f"{name:<58} {seconds * 1e6:10.1f} us{ratio}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=200)
    repeat = parser.parse_args().repeat
    records = os.urandom(MIB)

    copy = best_of(repeat, lambda: bytearray(records))
    report("baseline: copy 1 MiB", copy)
    frame = produce_frame(records)
    report(
        "Produce v9 1 MiB: parse_request + decode_request_body",
        best_of(repeat, lambda: decode(frame)),
        copy,
    )

    kio_fetch = fetch_response(records)
    kio_time = best_of(repeat, lambda: encode_response(1, kio_fetch))
    report("Fetch v12 1 MiB: kio writer (encode_response)", kio_time, copy)
    report(
        "Fetch v12 1 MiB: encode_fetch_response, bytes records",
        best_of(repeat, lambda: encode_fetch_response(1, kio_fetch)),
        copy,
    )
    sliced = fetch_response(FileSlice(MIB))
    report(
        "Fetch v12 1 MiB: encode_fetch_response, file slice",
        best_of(repeat, lambda: encode_fetch_response(1, sliced)),
        copy,
    )

    many = fetch_response(FileSlice(4096), partitions=100)
    many_kio = fetch_response(os.urandom(4096), partitions=100)
    kio_many = best_of(repeat, lambda: encode_response(1, many_kio))
    report("Fetch v12 100 x 4 KiB: kio writer", kio_many)
    report(
        "Fetch v12 100 x 4 KiB: encode_fetch_response, slices",
        best_of(repeat, lambda: encode_fetch_response(1, many)),
        kio_many,
    )

    metadata = MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=None, name="events"),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    small = memoryview(encode_request(1, "bench", metadata))[4:]
    report("Metadata v12 request: parse + decode", best_of(repeat, lambda: decode(small)))

    stream = encode_request(
        1,
        "bench",
        ProduceRequest(
            transactional_id=None,
            acks=1,
            timeout=datetime.timedelta(seconds=1),
            topic_data=(
                TopicProduceData(
                    name="t", partition_data=(PartitionProduceData(index=0, records=records),)
                ),
            ),
        ),
    )
    chunks = [stream[i : i + 65536] for i in range(0, len(stream), 65536)]

    def frame_in_reads() -> None:
        decoder = FrameDecoder(2 * MIB)
        for chunk in chunks:
            decoder.feed(chunk)

    report("FrameDecoder: 1 MiB frame in 64 KiB reads", best_of(repeat, frame_in_reads), copy)
    report(
        "FrameDecoder: 1 MiB frame in one read",
        best_of(repeat, lambda: FrameDecoder(2 * MIB).feed(stream)),
        copy,
    )


if __name__ == "__main__":
    main()
