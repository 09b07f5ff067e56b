"""Builders for the controller's decision tests: images from records, brokers and topics as
records, kio requests of any version from plain values, and results applied to an image."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from kio.index import load_request_schema

from spark_log.controller.controller_result import ControllerResult
from spark_log.controller.controller_settings import ControllerSettings
from spark_log.metadata import MetadataImage, MetadataRecord, Provenance, replay_records
from spark_log.metadata.records import (
    BrokerEndpoint,
    BrokerFeature,
    ConfigRecord,
    FeatureLevelRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from spark_log.protocol.entity_build import build

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"
SETTINGS = ControllerSettings(cluster_id=CLUSTER_ID, node_id=3000,
                              controller_ids=frozenset({3000}))
MV = 14  # metadata.version 3.6-IV2


def incarnation(broker_id: int, generation: int = 0) -> uuid.UUID:
    return uuid.UUID(int=(broker_id << 32) | generation | (1 << 100))


def topic_id(name: str) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_DNS, name)


def broker(broker_id: int, *, fenced: bool = False, rack: str | None = None,
           epoch: int | None = None, generation: int = 0,
           in_controlled_shutdown: bool = False) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id=broker_id, incarnation_id=incarnation(broker_id, generation),
        broker_epoch=100 + broker_id if epoch is None else epoch,
        end_points=(BrokerEndpoint(name="PLAINTEXT", host=f"b{broker_id}", port=9092),),
        features=(BrokerFeature(name="metadata.version", min_supported_version=1,
                                max_supported_version=MV),),
        rack=rack, fenced=fenced, in_controlled_shutdown=in_controlled_shutdown)


def topic(name: str, assignments: Sequence[Sequence[int]], *,
          isr: Sequence[Sequence[int]] | None = None,
          leaders: Sequence[int] | None = None) -> list[MetadataRecord]:
    """A topic whose partition i has replicas assignments[i], ISR isr[i] (all replicas by
    default) and leader leaders[i] (the first ISR member by default)."""
    tid = topic_id(name)
    records: list[MetadataRecord] = [TopicRecord(name=name, topic_id=tid)]
    for index, replicas in enumerate(assignments):
        in_sync = tuple(isr[index]) if isr is not None else tuple(replicas)
        leader = leaders[index] if leaders is not None else (in_sync[0] if in_sync else -1)
        records.append(PartitionRecord(partition_id=index, topic_id=tid, replicas=tuple(replicas),
                                       isr=in_sync, leader=leader, leader_epoch=0,
                                       partition_epoch=0))
    return records


def topic_config(name: str, key: str, value: str | None) -> ConfigRecord:
    return ConfigRecord(resource_type=2, resource_name=name, name=key, value=value)


def image_of(*records: MetadataRecord | Iterable[MetadataRecord],
             metadata_version: int | None = MV) -> MetadataImage:
    """The image of `records` (lists are flattened), replayed from offset 0 in epoch 1."""
    flat: list[MetadataRecord] = []
    if metadata_version is not None:
        flat.append(FeatureLevelRecord(name="metadata.version", feature_level=metadata_version))
    for item in records:
        flat.extend(item if isinstance(item, list | tuple) else [item])  # type: ignore[arg-type]
    return replay_records(MetadataImage.EMPTY, flat, Provenance(len(flat) - 1, 1))


def apply(image: MetadataImage, result: ControllerResult[Any]) -> MetadataImage:
    """`image` with the result's records replayed (as the caller does once it appends them)."""
    if not result.records:
        return image
    offset = image.provenance.offset + len(result.records)
    return replay_records(image, result.records, Provenance(offset, image.provenance.epoch))


def request(api_key: int, version: int, **fields: Any) -> Any:
    """The kio request of `api_key` v`version` from plain values (nested ones as dicts)."""
    return build(load_request_schema(api_key, version), fields)


def records_of(result: ControllerResult[Any], record_type: type) -> list[Any]:
    return [record for record in result.records if isinstance(record, record_type)]
