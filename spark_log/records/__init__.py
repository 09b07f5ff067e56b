"""The v2 RecordBatch format: pure functions from bytes to values and back, no I/O.

Build a batch with `build_batch(records, ...)`, decode one with `decode_batch(buf)`, walk a log
slice lazily with `iter_batches(view)`. Every malformed input raises `CorruptRecordError`.

The bottom layer: imports nothing of spark_log's but the small top-level helpers.
"""

from .batch_header import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    BatchHeader,
    Compression,
    TimestampType,
    iter_headers,
    peek_size,
    read_header,
    set_base_offset,
    set_partition_leader_epoch,
    verify_crc,
)
from .compression import DEFAULT_MAX_DECOMPRESSED_SIZE, compress, decompress
from .control_record import (
    ControlRecordType,
    EndTransactionMarker,
    build_end_transaction_batch,
    parse_control_record_type,
    parse_end_transaction_marker,
    read_end_transaction_marker,
)
from .errors import CorruptRecordError
from .record import Header, Record, record_values
from .record_batch import (
    NO_TIMESTAMP,
    BatchView,
    DecodedBatch,
    build_batch,
    decode_batch,
    iter_batches,
)

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "HEADER_SIZE",
    "LOG_OVERHEAD",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "BatchHeader",
    "BatchView",
    "Compression",
    "ControlRecordType",
    "CorruptRecordError",
    "DecodedBatch",
    "EndTransactionMarker",
    "Header",
    "Record",
    "TimestampType",
    "build_batch",
    "build_end_transaction_batch",
    "compress",
    "decode_batch",
    "decompress",
    "iter_batches",
    "iter_headers",
    "parse_control_record_type",
    "parse_end_transaction_marker",
    "peek_size",
    "read_end_transaction_marker",
    "read_header",
    "record_values",
    "set_base_offset",
    "set_partition_leader_epoch",
    "verify_crc",
]
