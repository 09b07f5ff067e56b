"""Kafka error codes for the exceptions the broker's parts raise.

Handlers answer per-partition or per-resource errors instead of failing the request: they catch
`Exception` around one unit of work and call `error_code_for`, which knows storage's exceptions
(by their Kafka error name), topic-metadata errors, and `KafkaError` raised by the broker itself.
Anything else is UNKNOWN_SERVER_ERROR and is logged with its traceback.
"""

from __future__ import annotations

import logging

from spark_log.protocol import ErrorCode
from spark_log.records.errors import CorruptRecordError
from spark_log.storage.data_dir.topics_file import InvalidTopicError
from spark_log.storage.errors import StorageError, kafka_error_name

log = logging.getLogger(__name__)


class KafkaError(Exception):
    """An error the broker answers with `code` and, where the API has one, `message`."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message


class TopicExistsError(ValueError):
    """TOPIC_ALREADY_EXISTS."""


class UnknownTopicError(KeyError):
    """UNKNOWN_TOPIC_OR_PARTITION."""


class InvalidPartitionsError(ValueError):
    """INVALID_PARTITIONS: a partition count below 1 or not above the current count."""


_METADATA_ERRORS: dict[type[Exception], ErrorCode] = {
    InvalidTopicError: ErrorCode.invalid_topic_exception,
    TopicExistsError: ErrorCode.topic_already_exists,
    UnknownTopicError: ErrorCode.unknown_topic_or_partition,
    InvalidPartitionsError: ErrorCode.invalid_partitions,
}


def error_code_for(exc: BaseException) -> ErrorCode:
    if isinstance(exc, KafkaError):
        return exc.code
    if isinstance(exc, (StorageError, CorruptRecordError)):
        return ErrorCode[kafka_error_name(exc).lower()]
    for kind, code in _METADATA_ERRORS.items():
        if isinstance(exc, kind):
            return code
    log.error("unexpected error while handling a request", exc_info=exc)
    return ErrorCode.unknown_server_error


def error_message_for(exc: BaseException) -> str:
    if isinstance(exc, KafkaError):
        return exc.message or exc.code.name.upper()
    if isinstance(exc, UnknownTopicError):
        return "This server does not host this topic-partition."
    return str(exc) or type(exc).__name__
