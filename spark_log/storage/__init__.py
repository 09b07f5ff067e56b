"""spark_log.storage: the crash-safe segmented partition log (Kafka's LogSegment, UnifiedLog,
LogManager). Files only: storage takes a Clock and a FileSystem and never touches sockets.

The broker's entry points are re-exported here.
"""

from .append_info import AppendInfo, AppendOrigin
from .errors import (
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
from .file_records import EMPTY_SLICE, FetchSlice
from .filesystem import DEFAULT_FS, FileSystem
from .log_config import DEFAULT_CONFIG, DEFINITIONS, ConfigDefinition, ConfigType, LogConfig
from .log_manager import LogManager
from .log_validator import RecordValidator
from .partition_log import PartitionLog
from .timestamp_search import HEADER_ONLY, RecordSearch, TimestampAndOffset

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
