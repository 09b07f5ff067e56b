"""DeleteTopics (v1-v6) as the active controller decides it (Kafka's ControllerApis.deleteTopics
and ReplicationControlManager.deleteTopics): topics named by name (every version) or by id
(v6), a RemoveTopicRecord for each one found. The topic's configs go with it when the record is
replayed.

The checks are Kafka's, and so is the order of the results: requests that name neither or both
of name and id, names and ids given twice, unknown ids, unknown names (and names whose topic's
id was also given), then the deleted topics. (Kafka then shuffles them, so that their positions
do not tell absent topics from ones the client may not see; there are no ACLs here, so the
order is kept.) With `delete.topic.enable` off every topic fails: INVALID_REQUEST before v3,
TOPIC_DELETION_DISABLED from v3.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from spark_log.metadata import MetadataImage
from spark_log.metadata.records import ZERO_UUID, RemoveTopicRecord
from spark_log.protocol import ErrorCode

from .controller_result import ApiError, ControllerResult, response_for
from .controller_settings import ControllerSettings

__all__ = ["delete_topics", "every_topic_fails"]

_NONE = ApiError(ErrorCode.none)


class _Deletion:
    """The results of one DeleteTopics, in the order they are decided."""

    def __init__(self) -> None:
        self.results: list[dict[str, Any]] = []
        self.names: dict[str, None] = {}  # provided once, in order
        self.ids: dict[UUID, None] = {}
        self.duplicate_names: dict[str, None] = {}
        self.duplicate_ids: dict[UUID, None] = {}

    def add(self, name: str | None, topic_id: UUID, error: ApiError) -> None:
        self.results.append({"name": name, "topic_id": topic_id, "error_code": error.code,
                             "error_message": error.message})

    def provide_name(self, name: str) -> None:
        if name in self.duplicate_names or name in self.names:
            self.duplicate_names[name] = None
            self.names.pop(name, None)
        else:
            self.names[name] = None

    def provide_id(self, topic_id: UUID) -> None:
        if topic_id in self.duplicate_ids or topic_id in self.ids:
            self.duplicate_ids[topic_id] = None
            self.ids.pop(topic_id, None)
        else:
            self.ids[topic_id] = None


def delete_topics(image: MetadataImage, request: Any, *,
                  settings: ControllerSettings) -> ControllerResult[Any]:
    """A DeleteTopics: a RemoveTopicRecord per topic found, and a result per topic named."""
    if not settings.delete_topic_enable:
        return _deletion_disabled(request)
    deletion = _Deletion()
    _read_request(request, deletion)
    for name in deletion.duplicate_names:
        deletion.add(name, ZERO_UUID, ApiError(ErrorCode.invalid_request, "Duplicate topic name."))
    for topic_id in deletion.duplicate_ids:
        deletion.add(None, topic_id, ApiError(ErrorCode.invalid_request, "Duplicate topic id."))
    to_delete: dict[UUID, str] = {}
    for topic_id in deletion.ids:
        topic = image.topics.get(topic_id)
        if topic is None:
            deletion.add(None, topic_id, ApiError.of(ErrorCode.unknown_topic_id))
        else:
            to_delete[topic_id] = topic.name
    for name in deletion.names:
        topic = image.topic(name)
        if topic is None:
            deletion.add(name, ZERO_UUID, ApiError.of(ErrorCode.unknown_topic_or_partition))
        elif topic.id in to_delete or topic.id in deletion.duplicate_ids:
            to_delete.pop(topic.id, None)
            deletion.add(name, topic.id, ApiError(
                ErrorCode.invalid_request,
                "The provided topic name maps to an ID that was already supplied."))
        else:
            to_delete[topic.id] = name
    for topic_id, name in to_delete.items():
        deletion.add(name, topic_id, _NONE)
    records = [RemoveTopicRecord(topic_id=topic_id) for topic_id in to_delete]
    return ControllerResult.of(records, response_for(request, {"responses": deletion.results}))


def _read_request(request: Any, deletion: _Deletion) -> None:
    """The names and ids a request provides (v1-v5: `topic_names`; v6: `topics`)."""
    for name in getattr(request, "topic_names", ()):
        deletion.provide_name(name)
    for topic in getattr(request, "topics", ()):
        topic_id = topic.topic_id or ZERO_UUID
        if topic.name is None and topic_id == ZERO_UUID:
            deletion.add(None, ZERO_UUID, ApiError(ErrorCode.invalid_request,
                                                   "Neither topic name nor id were specified."))
        elif topic.name is None:
            deletion.provide_id(topic_id)
        elif topic_id == ZERO_UUID:
            deletion.provide_name(topic.name)
        else:
            deletion.add(topic.name, topic_id, ApiError(
                ErrorCode.invalid_request, "You may not specify both topic name and topic id."))


def _deletion_disabled(request: Any) -> ControllerResult[Any]:
    """Every topic fails, as Kafka's error response for the whole request."""
    if request.__version__ < 3:
        error = ApiError(ErrorCode.invalid_request, "Topic deletion is disabled.")
    else:
        error = ApiError.of(ErrorCode.topic_deletion_disabled)
    return ControllerResult.of((), every_topic_fails(request, error))


def every_topic_fails(request: Any, error: ApiError) -> Any:
    """The DeleteTopics response in which every topic named fails with `error` (Kafka's
    DeleteTopicsRequest.getErrorResponse)."""
    named = [(name, ZERO_UUID) for name in getattr(request, "topic_names", ())]
    named += [(topic.name, topic.topic_id or ZERO_UUID) for topic in getattr(request, "topics", ())]
    results = [{"name": name, "topic_id": topic_id, "error_code": error.code,
                "error_message": error.message} for name, topic_id in named]
    return response_for(request, {"responses": results})
