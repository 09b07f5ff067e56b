"""The requests the active controller serves, by API key: for each, the decision that answers
it (a pure function of the working image, see `controller_result`) and the answer it gets when
this node is not the active controller — NOT_CONTROLLER in every error field, top-level and per
item, as Kafka's request classes build their error responses (getErrorResponse), so that the
broker forwarding it looks for the controller again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from spark_log.metadata import MetadataImage
from spark_log.metadata.records import ZERO_UUID
from spark_log.protocol import ErrorCode

from .alter_partition import alter_partition
from .broker_heartbeats import BrokerHeartbeats
from .cluster_control import broker_heartbeat, register_broker, unregister_broker
from .config_control import alter_configs, incremental_alter_configs
from .controller_result import ApiError, ControllerResult, response_for
from .controller_settings import ControllerSettings
from .leader_election import elect_leaders, every_partition_fails
from .partition_reassignments import (
    alter_partition_reassignments,
    every_reassignment_fails,
    list_partition_reassignments,
)
from .producer_id_control import allocate_producer_ids
from .replication_control import Random, create_partitions, create_topics
from .topic_deletion import delete_topics, every_topic_fails
from .working_image import WorkingImage

__all__ = [
    "CONTROLLER_APIS",
    "NOT_CONTROLLER",
    "Decision",
    "DecisionInput",
    "decision_for",
    "not_controller_response",
]

# Kafka's API keys of the requests the controller serves.
CREATE_TOPICS = 19
DELETE_TOPICS = 20
ALTER_CONFIGS = 33
CREATE_PARTITIONS = 37
ELECT_LEADERS = 43
ALTER_PARTITION_REASSIGNMENTS = 45
LIST_PARTITION_REASSIGNMENTS = 46
ALTER_PARTITION = 56
INCREMENTAL_ALTER_CONFIGS = 44
BROKER_REGISTRATION = 62
BROKER_HEARTBEAT = 63
UNREGISTER_BROKER = 64
ALLOCATE_PRODUCER_IDS = 67

NOT_CONTROLLER = ApiError.of(ErrorCode.not_controller)


@dataclass(frozen=True)
class DecisionInput:
    """What a decision reads: the working image (committed plus appended), the broker
    sessions, the settings, the time, the offset its first record will get, randomness."""

    working: WorkingImage
    heartbeats: BrokerHeartbeats
    settings: ControllerSettings
    now_ms: int
    next_offset: int
    random: Random

    @property
    def image(self) -> MetadataImage:
        return self.working.image


Decision = Callable[[DecisionInput, Any], ControllerResult[Any]]


def _register(c: DecisionInput, request: Any) -> ControllerResult[Any]:
    return register_broker(c.image, request, c.heartbeats, settings=c.settings,
                           now_ms=c.now_ms, next_offset=c.next_offset)


def _heartbeat(c: DecisionInput, request: Any) -> ControllerResult[Any]:
    return broker_heartbeat(c.image, request, c.heartbeats, settings=c.settings,
                            now_ms=c.now_ms, next_offset=c.next_offset,
                            register_offset=c.working.register_offset(request.broker_id))


_DECISIONS: Mapping[int, Decision] = {
    BROKER_REGISTRATION: _register,
    BROKER_HEARTBEAT: _heartbeat,
    UNREGISTER_BROKER: lambda c, r: unregister_broker(c.image, r, c.heartbeats,
                                                      settings=c.settings),
    CREATE_TOPICS: lambda c, r: create_topics(c.image, r, settings=c.settings, random=c.random),
    DELETE_TOPICS: lambda c, r: delete_topics(c.image, r, settings=c.settings),
    CREATE_PARTITIONS: lambda c, r: create_partitions(c.image, r, random=c.random),
    INCREMENTAL_ALTER_CONFIGS: lambda c, r: incremental_alter_configs(c.image, r,
                                                                      settings=c.settings),
    ALTER_CONFIGS: lambda c, r: alter_configs(c.image, r, settings=c.settings),
    ALLOCATE_PRODUCER_IDS: lambda c, r: allocate_producer_ids(c.image, r),
    ELECT_LEADERS: lambda c, r: elect_leaders(c.image, r),
    ALTER_PARTITION_REASSIGNMENTS: lambda c, r: alter_partition_reassignments(
        c.image, r, settings=c.settings),
    LIST_PARTITION_REASSIGNMENTS: lambda c, r: list_partition_reassignments(c.image, r),
    ALTER_PARTITION: lambda c, r: alter_partition(c.image, r),
}

CONTROLLER_APIS = frozenset(_DECISIONS)


def decision_for(request: Any) -> Decision:
    """The decision answering `request` (a kio request entity); ValueError for an API the
    controller does not serve."""
    decision = _DECISIONS.get(getattr(request, "__api_key__", -1))
    if decision is None:
        raise ValueError(f"the controller does not serve {type(request).__name__}")
    return decision


# ---- NOT_CONTROLLER -------------------------------------------------------------------------

def _error(error: ApiError) -> dict[str, Any]:
    return {"error_code": error.code, "error_message": error.message}


def _topics_fail(request: Any, error: ApiError) -> Any:
    return response_for(request, {"topics": [
        {"name": topic.name, "topic_id": ZERO_UUID, **_error(error), "num_partitions": -1,
         "replication_factor": -1, "configs": ()} for topic in request.topics]})


def _resources_fail(request: Any, error: ApiError) -> Any:
    return response_for(request, {"responses": [
        {**_error(error), "resource_type": entry.resource_type,
         "resource_name": entry.resource_name} for entry in request.resources]})


_ERROR_RESPONSES: Mapping[int, Callable[[Any, ApiError], Any]] = {
    BROKER_REGISTRATION: lambda r, e: response_for(r, {"error_code": e.code,
                                                       "broker_epoch": -1}),
    BROKER_HEARTBEAT: lambda r, e: response_for(r, {
        "error_code": e.code, "is_caught_up": False, "is_fenced": True,
        "should_shut_down": False}),
    UNREGISTER_BROKER: lambda r, e: response_for(r, _error(e)),
    CREATE_TOPICS: _topics_fail,
    DELETE_TOPICS: every_topic_fails,
    CREATE_PARTITIONS: lambda r, e: response_for(r, {"results": [
        {"name": topic.name, **_error(e)} for topic in r.topics]}),
    INCREMENTAL_ALTER_CONFIGS: _resources_fail,
    ALTER_CONFIGS: _resources_fail,
    ALLOCATE_PRODUCER_IDS: lambda r, e: response_for(r, {
        "error_code": e.code, "producer_id_start": 0, "producer_id_len": 0}),
    ELECT_LEADERS: every_partition_fails,
    ALTER_PARTITION_REASSIGNMENTS: every_reassignment_fails,
    LIST_PARTITION_REASSIGNMENTS: lambda r, e: response_for(r, {**_error(e), "topics": []}),
    ALTER_PARTITION: lambda r, e: response_for(r, {"throttle_time": 0, "error_code": e.code,
                                                   "topics": []}),
}


def not_controller_response(request: Any) -> Any:
    """`request`'s response with NOT_CONTROLLER in every error field."""
    decision_for(request)
    return _ERROR_RESPONSES[request.__api_key__](request, NOT_CONTROLLER)
