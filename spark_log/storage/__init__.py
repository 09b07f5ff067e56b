"""spark_log.storage: the crash-safe segmented partition log (Kafka's storage module). Files
only: storage takes a Clock and a FileSystem and never touches sockets.

    log/              segments, the partition log, loading and recovery, the log manager
    index/            offset, time and transaction indexes
    producer_state/   producers' epochs, sequences and open transactions; snapshots
    cleaner/          log compaction
    data_dir/         the data directory's other files: .lock, meta.properties, topics.json,
                      producer-id-block
    errors, filesystem, checkpoint, append_info   shared by all of them

May import records/, the clock and `spark_log.properties`; never the broker, clients, the data
source or the CLI (import-linter contracts in pyproject.toml). The broker's entry points are
re-exported here.
"""

from spark_log.storage.append_info import AppendInfo, AppendOrigin
from spark_log.storage.errors import (
    CorruptRecordError,
    InvalidConfigurationError,
    InvalidRecordError,
    InvalidTimestampError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    OffsetsOutOfOrderError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    StorageError,
    UnexpectedAppendOffsetError,
    kafka_error_name,
)
from spark_log.storage.filesystem import DEFAULT_FS, FileSystem
from spark_log.storage.log.file_records import EMPTY_SLICE, FetchSlice
from spark_log.storage.log.log_config import (
    DEFAULT_CONFIG,
    DEFINITIONS,
    ConfigDefinition,
    ConfigType,
    LogConfig,
)
from spark_log.storage.log.log_manager import LogManager
from spark_log.storage.log.log_validator import RecordValidator
from spark_log.storage.log.partition_log import PartitionLog
from spark_log.storage.log.timestamp_search import HEADER_ONLY, RecordSearch, TimestampAndOffset

__all__ = [
    "DEFAULT_CONFIG",
    "DEFAULT_FS",
    "DEFINITIONS",
    "EMPTY_SLICE",
    "HEADER_ONLY",
    "AppendInfo",
    "AppendOrigin",
    "ConfigDefinition",
    "ConfigType",
    "CorruptRecordError",
    "FetchSlice",
    "FileSystem",
    "InvalidConfigurationError",
    "InvalidRecordError",
    "InvalidTimestampError",
    "KafkaStorageError",
    "LogConfig",
    "LogManager",
    "OffsetOutOfRangeError",
    "OffsetsOutOfOrderError",
    "PartitionLog",
    "RecordBatchTooLargeError",
    "RecordSearch",
    "RecordTooLargeError",
    "RecordValidator",
    "StorageError",
    "TimestampAndOffset",
    "UnexpectedAppendOffsetError",
    "kafka_error_name",
]
