"""The answers of a controller that is not active: NOT_CONTROLLER in every error field of every
API it serves, at every version, items named in the request kept."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import pytest

from spark_log.controller.controller_apis import (
    CONTROLLER_APIS,
    decision_for,
    not_controller_response,
)
from spark_log.protocol import ErrorCode

from .control_fixtures import request
from .controller_harness import registration

TOPIC = {"name": "t", "num_partitions": 1, "replication_factor": 1, "assignments": [],
         "configs": []}
RESOURCE = {"resource_type": 2, "resource_name": "t", "configs": []}
FIELDS: dict[int, dict[str, Any]] = {
    63: {"broker_id": 1, "broker_epoch": 5, "current_metadata_offset": 5, "want_fence": False,
         "want_shut_down": False},
    64: {"broker_id": 1},
    19: {"timeout": 10, "validate_only": False, "topics": [TOPIC, {**TOPIC, "name": "u"}]},
    20: {"timeout": 10, "topic_names": ["t", "u"],
         "topics": [{"name": "t", "topic_id": uuid.UUID(int=0)},
                    {"name": None, "topic_id": uuid.UUID(int=9)}]},
    37: {"timeout": 10, "validate_only": False,
         "topics": [{"name": "t", "count": 3, "assignments": None}]},
    44: {"validate_only": False, "resources": [RESOURCE, {**RESOURCE, "resource_type": 4,
                                                         "resource_name": "1"}]},
    33: {"validate_only": False, "resources": [RESOURCE]},
    67: {"broker_id": 1, "broker_epoch": 5},
    43: {"timeout": 10, "election_type": 0,
         "topic_partitions": [{"topic": "t", "partitions": [0, 1]}]},
    56: {"broker_id": 1, "broker_epoch": 5, "topics": [{"topic_id": uuid.UUID(int=9),
                                                         "partitions": []}]},
    45: {"timeout": 10, "topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "replicas": [1, 2]}, {"partition_index": 1, "replicas": None}]}]},
    46: {"timeout": 10, "topics": None},
}
VERSIONS = {62: range(5), 63: range(2), 64: range(1), 19: range(2, 8), 20: range(1, 7),
            37: range(4), 44: range(2), 33: range(3), 67: range(1), 43: range(3),
            56: range(2, 4), 45: range(2), 46: range(1)}
# Kafka answers AlterPartition's errors at the top level alone, and ListPartitionReassignments
# names no items.
TOP_LEVEL_ONLY = {56, 46}


def error_codes(entity: Any) -> list[Any]:
    """Every error_code in the entity, nested ones included."""
    found = []
    for item in dataclasses.fields(entity):
        value = getattr(entity, item.name)
        if item.name == "error_code":
            found.append(value)
        for element in value if isinstance(value, tuple) else (value,):
            if dataclasses.is_dataclass(element):
                found += error_codes(element)
    return found


@pytest.mark.parametrize(("api_key", "version"),
                         [(k, v) for k, versions in VERSIONS.items() for v in versions])
def test_every_error_field_says_not_controller(api_key: int, version: int) -> None:
    built = registration(1, version) if api_key == 62 else request(api_key, version,
                                                                   **FIELDS[api_key])
    response = not_controller_response(built)
    assert (response.__api_key__, response.__version__) == (api_key, version)
    codes = error_codes(response)
    assert codes and set(codes) == {ErrorCode.not_controller}
    items = [getattr(response, name) for name in ("topics", "responses", "results",
                                                  "replica_election_results")
             if hasattr(response, name)]
    if api_key not in TOP_LEVEL_ONLY:
        assert all(len(i) >= 1 for i in items)  # every item named is answered


def test_every_api_served_has_a_not_controller_answer() -> None:
    assert set(VERSIONS) == CONTROLLER_APIS
    with pytest.raises(ValueError, match="does not serve"):
        decision_for(request(18, 0))
