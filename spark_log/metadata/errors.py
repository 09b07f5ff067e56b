"""The errors the metadata package raises: bytes that are not a metadata record, a record that
cannot be written at the version asked, a record that contradicts the image it is applied to,
and placements Kafka refuses (each carrying the error code Kafka answers with).
"""

from __future__ import annotations

from typing import Any

from spark_log.protocol import ErrorCode

__all__ = [
    "ImageError",
    "InvalidReplicaAssignmentError",
    "InvalidReplicationFactorError",
    "NoReassignmentInProgressError",
    "PlacementError",
    "RecordDecodeError",
    "RecordEncodeError",
]


class RecordDecodeError(ValueError):
    """Bytes that do not decode as a metadata record (Kafka's MetadataParseException): an unknown
    frame version, api key or version, a bad varint, a value cut short, bytes left over. The
    message names the record type and the field where reading stopped."""


class RecordEncodeError(ValueError):
    """A record that cannot be written at the version asked: a value out of its type's range, or
    a value other than the default in a field the version does not have."""


class ImageError(ValueError):
    """A record that contradicts the image it is replayed on (a change to an unknown topic, a
    topic name already in use, a broker epoch that does not match). `record` is the record."""

    def __init__(self, record: Any, reason: str) -> None:
        super().__init__(f"unable to replay {record!r}: {reason}")
        self.record = record
        self.reason = reason


class PlacementError(ValueError):
    """A replica assignment Kafka refuses; `error_code` is what a CreateTopics or
    CreatePartitions response carries for it."""

    error_code: ErrorCode = ErrorCode.unknown_server_error


class InvalidReplicationFactorError(PlacementError):
    """Not enough usable brokers for the replication factor, or a factor below one."""

    error_code = ErrorCode.invalid_replication_factor


class InvalidReplicaAssignmentError(PlacementError):
    """An explicit assignment naming unknown brokers, a broker twice, or a replication factor
    that differs from the topic's other partitions."""

    error_code = ErrorCode.invalid_replica_assignment


class NoReassignmentInProgressError(PlacementError):
    """A reassignment cancelled where none is in progress."""

    error_code = ErrorCode.no_reassignment_in_progress
