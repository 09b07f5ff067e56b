"""What a controller decision returns (Kafka's ControllerResult): the metadata records to append
and the response to send once they commit; and the errors decisions answer with (Kafka's
ApiError and ApiException), with Kafka's default messages.

A decision is a pure function of the working image (the committed image with the records the
controller appended and awaits committing replayed on top) and a request. It never changes the
image: the caller appends `records` (as one batch when `atomic`), replays them into its working
image, and sends `response` once they are committed. Requests that change nothing give no
records and may be answered at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, TypeVar

from kio.index import load_response_schema

from spark_log.metadata import MetadataRecord, TopicPartition
from spark_log.protocol import ErrorCode
from spark_log.protocol.entity_build import build

__all__ = [
    "ApiError",
    "ControllerError",
    "ControllerResult",
    "default_message",
    "response_for",
]

R = TypeVar("R")

# Kafka's default messages (Errors.java) for the codes a decision may answer with; ApiError(code)
# carries them, as Kafka's `new ApiError(Errors.X)` does.
_DEFAULT_MESSAGES: Mapping[ErrorCode, str] = {
    ErrorCode.unknown_topic_or_partition: "This server does not host this topic-partition.",
    ErrorCode.unsupported_version: "The version of API is not supported.",
    ErrorCode.topic_already_exists: "Topic with this name already exists.",
    ErrorCode.invalid_partitions: "Number of partitions is below 1.",
    ErrorCode.invalid_config: "Configuration is invalid.",
    ErrorCode.topic_deletion_disabled: "Topic deletion is disabled.",
    ErrorCode.stale_broker_epoch: "Broker epoch has changed.",
    ErrorCode.preferred_leader_not_available: "The preferred leader was not available.",
    ErrorCode.eligible_leaders_not_available:
        "Eligible topic partition leaders are not available.",
    ErrorCode.election_not_needed: "Leader election not needed for topic partition.",
    ErrorCode.no_reassignment_in_progress: "No partition reassignment is in progress.",
    ErrorCode.unknown_topic_id: "This server does not host this topic ID.",
    ErrorCode.duplicate_broker_registration: "This broker ID is already in use.",
    ErrorCode.broker_id_not_registered: "The given broker ID was not registered.",
    ErrorCode.inconsistent_cluster_id:
        "The clusterId in the request does not match that found on the server.",
    ErrorCode.not_controller: "This is not the correct controller for this cluster.",
    ErrorCode.unknown_server_error:
        "The server experienced an unexpected error when processing the request.",
}


def default_message(code: ErrorCode) -> str | None:
    """Kafka's default message for `code` (None for codes no decision answers with)."""
    return _DEFAULT_MESSAGES.get(code)


class ApiError(NamedTuple):
    """An error code and its message (None: no message), as a response carries them."""

    code: ErrorCode
    message: str | None = None

    @classmethod
    def of(cls, code: ErrorCode) -> ApiError:
        """The error with Kafka's default message (Kafka's `new ApiError(Errors.X)`)."""
        return cls(code, default_message(code))

    @property
    def is_failure(self) -> bool:
        return self.code != ErrorCode.none


NONE = ApiError(ErrorCode.none)


class ControllerError(Exception):
    """A refusal with a Kafka error code (Kafka's ApiException); `api_error` is what a response
    carries for it: no message when it is the code's default, as Kafka's ApiError.fromThrowable
    leaves it."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message

    @property
    def api_error(self) -> ApiError:
        if self.message is None or self.message == default_message(self.code):
            return ApiError(self.code)
        return ApiError(self.code, self.message)


@dataclass(frozen=True)
class ControllerResult(Generic[R]):
    """Records to append and the response to send once they commit.

    Invariants: `records` are valid against the image the decision read (replaying them in
    order raises no ImageError); an `atomic` result is appended as one batch, so its records
    commit or vanish together. `unclean_elections` names the partitions whose new leader comes
    from outside the ISR (possible data loss: the caller logs them).
    """

    records: tuple[MetadataRecord, ...]
    response: R
    atomic: bool = True
    unclean_elections: tuple[TopicPartition, ...] = ()

    @classmethod
    def of(cls, records: Iterable[MetadataRecord], response: R,
           unclean: Iterable[TopicPartition] = ()) -> ControllerResult[R]:
        return cls(tuple(records), response, True, tuple(unclean))

    def without_records(self) -> ControllerResult[R]:
        """The same response with nothing to append (validate_only)."""
        return ControllerResult((), self.response, self.atomic, ())


def response_for(request: Any, value: Mapping[str, Any]) -> Any:
    """The kio response of `request`'s API and version, built from plain values (fields the
    version lacks are dropped, defaults filled; see `protocol.entity_build`)."""
    response_type = load_response_schema(request.__api_key__, request.__version__)
    return build(response_type, {"throttle_time": 0, **value})
