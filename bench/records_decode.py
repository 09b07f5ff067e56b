"""Micro benchmark of the record codec; prints absolute times and ratios, not a test.

Decodes a ~1 MiB batch of 100-byte records per codec and compares with a plain bytes copy of
the same size in the same run (the floor any decoder pays), and with kafka-python's pure
Python decoder where it has the codec. Also times building, key scans and the lazy walk that
skips batches.

Usage, from the repository root: PYTHONPATH=. python bench/records_decode.py [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import time

from spark_log.records import (
    BatchView,
    Compression,
    Record,
    build_batch,
    decode_batch,
    iter_batches,
)

RECORD_VALUE = 100
BATCH_BYTES = 1 << 20


def best_of(repeat: int, fn) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def sample_records() -> list[Record]:
    count = BATCH_BYTES // (RECORD_VALUE + 12)
    rng = os.urandom(RECORD_VALUE // 2)
    return [
        Record(i, 1_700_000_000_000 + i, b"key-%06d" % i, (rng + b"%050d" % i)[:RECORD_VALUE])
        for i in range(count)
    ]


def kafka_python_decode(batch: bytes):
    try:
        from kafka.record.default_records import DefaultRecordBatch
    except ImportError:
        return None
    return lambda: list(DefaultRecordBatch(bytearray(batch)))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    repeat = parser.parse_args().repeat
    records = sample_records()
    plain = build_batch(records)
    copy_s = best_of(repeat, lambda: bytes(bytearray(plain)))
    print(f"{len(records)} records of {RECORD_VALUE} B, uncompressed batch {len(plain)} B")
    print(f"bytes copy of {len(plain)} B: {copy_s * 1e3:.3f} ms (the baseline)")
    print(
        f"{'codec':8} {'size':>9} {'build ms':>9} {'decode ms':>10} {'ns/rec':>7} "
        f"{'x copy':>8} {'keys ms':>8} {'kafka-python x':>15}"
    )
    for codec in Compression:
        batch = build_batch(records, compression=codec)
        build_s = best_of(repeat, lambda c=codec: build_batch(records, compression=c))
        decode_s = best_of(repeat, lambda b=batch: decode_batch(b))
        keys_s = best_of(repeat, lambda b=batch: list(BatchView(b).keys()))
        theirs = (
            kafka_python_decode(batch) if codec in (Compression.NONE, Compression.GZIP) else None
        )
        ratio = f"{best_of(repeat, theirs) / decode_s:.2f}" if theirs else "-"
        print(
            f"{codec.name.lower():8} {len(batch):9} {build_s * 1e3:9.2f} {decode_s * 1e3:10.2f} "
            f"{decode_s / len(records) * 1e9:7.0f} {decode_s / copy_s:8.0f} {keys_s * 1e3:8.2f} "
            f"{ratio:>15}"
        )
    log = b"".join(
        build_batch(records[i : i + 100], base_offset=i) for i in range(0, len(records), 100)
    )
    walk_s = best_of(repeat, lambda: sum(1 for _ in iter_batches(memoryview(log))))
    batches = sum(1 for _ in iter_batches(log))
    print(
        f"lazy walk of {batches} batches ({len(log)} B) without decoding: {walk_s * 1e3:.3f} ms "
        f"({walk_s / batches * 1e6:.2f} us/batch, {walk_s / copy_s:.1f}x copy)"
    )


if __name__ == "__main__":
    main()
