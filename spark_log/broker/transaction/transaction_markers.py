"""Writing COMMIT/ABORT markers to the partitions of a transaction (Kafka's
TransactionMarkerChannelManager).

A partition led here gets its marker appended directly (a control batch, origin COORDINATOR);
a `__consumer_offsets` partition led here goes through the group coordinator, which writes the
marker and makes the transaction's pending offsets committed (or drops them). WriteTxnMarkers
requests — from tools, or from another broker's coordinator — use the same path. A partition
led by another broker gets its marker in a WriteTxnMarkers request to that broker
(`send_markers`, one request per broker, asked again at the partition's current leader while
the answer is retriable).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from spark_log.broker.errors import KafkaError, UnknownTopicError, error_code_for
from spark_log.broker.group.offsets_topic import OFFSETS_TOPIC
from spark_log.protocol import ErrorCode
from spark_log.records import ControlRecordType, EndTransactionMarker, build_end_transaction_batch
from spark_log.storage.append_info import AppendOrigin

if TYPE_CHECKING:
    from spark_log.broker.coordinator.collaborators import PartitionLogs
    from spark_log.broker.transaction.collaborators import TransactionalOffsets
    from spark_log.clock import Clock

log = logging.getLogger(__name__)

# Markers carry coordinator epoch 0: fencing a stale coordinator by the leader epoch of its
# __transaction_state partition comes with replication.
COORDINATOR_EPOCH = 0
TopicPartition = tuple[str, int]
# Errors after which a marker is never written: the partition is gone, or a newer epoch or
# coordinator already ended the transaction there (Kafka stops sending in these cases too).
_GIVE_UP = frozenset({ErrorCode.unknown_topic_or_partition, ErrorCode.invalid_producer_epoch,
                      ErrorCode.transaction_coordinator_fenced})


class OtherBrokers(Protocol):
    """The brokers of the cluster, as markers reach them."""

    def leader_of(self, topic: str, partition: int) -> int:
        """The partition's leader as this broker's metadata says (-1: none)."""
        ...

    async def send(self, broker_id: int, request: Any) -> Any | None:
        """The broker's answer to `request`, or None when it could not be reached."""
        ...


@dataclass(frozen=True, slots=True)
class MarkerChannel:
    """Where a transaction's markers go: `__consumer_offsets` partitions through the group
    coordinator (`groups`), every other partition appended to its log (`logs`) — when this
    broker (`node_id`) leads them; else to their leader through `brokers`."""

    groups: TransactionalOffsets
    logs: PartitionLogs
    clock: Clock
    node_id: int = -1
    brokers: OtherBrokers | None = None

    def remote_leader(self, topic: str, partition: int) -> int | None:
        """The other broker that leads the partition, None if it is led here (or by nobody
        known, which the local path answers with a retriable error)."""
        if self.brokers is None:
            return None
        leader = self.brokers.leader_of(topic, partition)
        return leader if leader >= 0 and leader != self.node_id else None


def write_marker(channel: MarkerChannel, topic: str, partition: int, producer_id: int,
                 producer_epoch: int, commit: bool,
                 coordinator_epoch: int = COORDINATOR_EPOCH) -> ErrorCode:
    """Write one marker; the error code Kafka's WriteTxnMarkers would answer for it."""
    try:
        if topic == OFFSETS_TOPIC:
            channel.groups.complete_transaction(producer_id, producer_epoch, commit,
                                                [partition], coordinator_epoch)
            return ErrorCode.none
        marker = EndTransactionMarker(
            ControlRecordType.COMMIT if commit else ControlRecordType.ABORT, coordinator_epoch)
        batch = build_end_transaction_batch(marker, producer_id=producer_id,
                                            producer_epoch=producer_epoch,
                                            timestamp=channel.clock.now_ms())
        channel.logs.append(topic, partition, batch, origin=AppendOrigin.COORDINATOR)
        return ErrorCode.none
    except UnknownTopicError:
        return ErrorCode.unknown_topic_or_partition
    except KafkaError as e:
        return e.code
    except Exception as e:
        return error_code_for(e)


def write_markers(channel: MarkerChannel, partitions: Iterable[TopicPartition],
                  producer_id: int, producer_epoch: int, commit: bool
                  ) -> tuple[set[TopicPartition], dict[int, list[TopicPartition]]]:
    """Write a transaction's markers to the partitions led here; returns (partitions to retry
    later, partitions led by other brokers by broker id — for `send_markers`)."""
    retry: set[TopicPartition] = set()
    remote: dict[int, list[TopicPartition]] = defaultdict(list)
    for topic, partition in sorted(partitions):
        leader = channel.remote_leader(topic, partition)
        if leader is not None:
            remote[leader].append((topic, partition))
            continue
        code = write_marker(channel, topic, partition, producer_id, producer_epoch, commit)
        if _settled(code, producer_id, topic, partition, commit):
            continue
        retry.add((topic, partition))
    return retry, dict(remote)


async def send_markers(channel: MarkerChannel, remote: Mapping[int, list[TopicPartition]],
                       producer_id: int, producer_epoch: int, commit: bool
                       ) -> set[TopicPartition]:
    """Send the markers of partitions led by other brokers, one WriteTxnMarkers request per
    broker; returns the partitions whose marker must be sent again."""
    assert channel.brokers is not None
    retry: set[TopicPartition] = set()
    for broker_id, partitions in sorted(remote.items()):
        answer = await channel.brokers.send(broker_id, _markers_request(
            partitions, producer_id, producer_epoch, commit))
        if answer is None:
            log.info("Broker %d did not answer the markers of producer %d; will retry",
                     broker_id, producer_id)
            retry.update(partitions)
            continue
        for marker in answer.markers:
            for topic in marker.topics:
                for result in topic.partitions:
                    if not _settled(ErrorCode(result.error_code), producer_id, topic.name,
                                    result.partition_index, commit):
                        retry.add((topic.name, result.partition_index))
    return retry


def _settled(code: ErrorCode, producer_id: int, topic: str, partition: int,
             commit: bool) -> bool:
    """Whether a marker needs no retry after `code`: written, or never to be written."""
    if code == ErrorCode.none:
        return True
    if code in _GIVE_UP:
        log.warning("Not writing the %s marker of producer %d to %s-%d: %s",
                    "COMMIT" if commit else "ABORT", producer_id, topic, partition, code.name)
        return True
    log.error("Writing the marker of producer %d to %s-%d failed (%s); will retry",
              producer_id, topic, partition, code.name)
    return False


def _markers_request(partitions: list[TopicPartition], producer_id: int, producer_epoch: int,
                     commit: bool) -> Any:
    from kio.schema.write_txn_markers.v1.request import (
        WritableTxnMarker,
        WritableTxnMarkerTopic,
        WriteTxnMarkersRequest,
    )

    by_topic: dict[str, list[int]] = defaultdict(list)
    for topic, partition in partitions:
        by_topic[topic].append(partition)
    topics = tuple(WritableTxnMarkerTopic(name=t, partition_indexes=tuple(ps))
                   for t, ps in sorted(by_topic.items()))
    return WriteTxnMarkersRequest(markers=(WritableTxnMarker(
        producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=commit,
        topics=topics, coordinator_epoch=COORDINATOR_EPOCH),))
