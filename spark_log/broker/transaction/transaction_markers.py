"""Writing COMMIT/ABORT markers to the partitions of a transaction (Kafka's
TransactionMarkerChannelManager, reduced to one broker).

Every partition is led here, so a marker is appended directly (a control batch, origin
COORDINATOR) instead of being sent in a WriteTxnMarkers request. A `__consumer_offsets`
partition goes through the group coordinator, which writes the marker and makes the
transaction's pending offsets committed (or drops them). WriteTxnMarkers requests from tools
use the same path.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

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

COORDINATOR_EPOCH = 0  # one broker leads every __transaction_state partition, forever
TopicPartition = tuple[str, int]
# Errors after which a marker is never written: the partition is gone, or a newer epoch or
# coordinator already ended the transaction there (Kafka stops sending in these cases too).
_GIVE_UP = frozenset({ErrorCode.unknown_topic_or_partition, ErrorCode.invalid_producer_epoch,
                      ErrorCode.transaction_coordinator_fenced})


@dataclass(frozen=True, slots=True)
class MarkerChannel:
    """Where a transaction's markers go: `__consumer_offsets` partitions through the group
    coordinator (`groups`), every other partition appended to its log (`logs`)."""

    groups: TransactionalOffsets
    logs: PartitionLogs
    clock: Clock


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


def write_markers(channel: MarkerChannel, partitions: frozenset[TopicPartition], producer_id: int,
                  producer_epoch: int, commit: bool) -> set[TopicPartition]:
    """Write a transaction's markers; returns the partitions to retry later."""
    retry = set()
    for topic, partition in sorted(partitions):
        code = write_marker(channel, topic, partition, producer_id, producer_epoch, commit)
        if code == ErrorCode.none:
            continue
        if code in _GIVE_UP:
            log.warning("Not writing the %s marker of producer %d to %s-%d: %s",
                        "COMMIT" if commit else "ABORT", producer_id, topic, partition,
                        code.name)
            continue
        log.error("Writing the marker of producer %d to %s-%d failed (%s); will retry",
                  producer_id, topic, partition, code.name)
        retry.add((topic, partition))
    return retry
