"""Appending a few records with plain Produce requests: a commit decision, a transaction's
barrier records. For bulk data use a real producer (librdkafka); this one builds one v2 batch
per partition, sends each leader one request with acks=all and returns the base offsets.

A transactional append (`producer_id`/`epoch` from InitProducerId, partitions added to the
transaction first) starts every partition at sequence 0, which is what the broker expects of
a producer epoch's first batch on a partition.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Mapping, Sequence

from spark_log.protocol import ErrorCode
from spark_log.protocol.api_keys import ApiKey
from spark_log.records.record import Record
from spark_log.records.record_batch import build_batch

from .wire import WireClient, WireError

TopicPartition = tuple[str, int]
KeyValue = tuple[bytes | None, bytes | None]
PRODUCE_VERSION = 7


def append(client: WireClient, records: Mapping[TopicPartition, Sequence[KeyValue]], *,
           transactional_id: str | None = None, producer_id: int = -1, epoch: int = -1
           ) -> dict[TopicPartition, int]:
    """Append `records` (key, value pairs per partition); returns each partition's base
    offset. Raises WireError for a partition the leader refuses or that has no leader."""
    leaders = client.leaders(topic for topic, _ in records)
    missing = [tp for tp in records if tp not in leaders]
    if missing:
        raise WireError(ErrorCode.unknown_topic_or_partition, f"no leader for {missing[0]}")
    now = int(time.time() * 1000)
    by_leader: dict[str, dict[TopicPartition, bytes]] = {}
    for tp, pairs in records.items():
        batch = build_batch([Record(i, now, k, v) for i, (k, v) in enumerate(pairs)],
                            producer_id=producer_id, producer_epoch=epoch,
                            base_sequence=0 if transactional_id else -1,
                            is_transactional=transactional_id is not None)
        by_leader.setdefault(leaders[tp], {})[tp] = batch
    offsets: dict[TopicPartition, int] = {}
    for address, batches in by_leader.items():
        offsets.update(_produce(client, address, batches, transactional_id))
    return offsets


def _produce(client: WireClient, address: str, batches: Mapping[TopicPartition, bytes],
             transactional_id: str | None) -> dict[TopicPartition, int]:
    by_topic: dict[str, list[dict[str, object]]] = {}
    for (topic, partition), batch in sorted(batches.items()):
        by_topic.setdefault(topic, []).append({"index": partition, "records": batch})
    answer = client.request(address, ApiKey.PRODUCE, PRODUCE_VERSION, {
        "transactional_id": transactional_id, "acks": -1,
        "timeout": dt.timedelta(seconds=client.timeout_s),
        "topic_data": [{"name": t, "partition_data": ps} for t, ps in by_topic.items()]})
    offsets = {}
    for topic in answer.responses:
        for p in topic.partition_responses:
            if p.error_code != ErrorCode.none:
                raise WireError(ErrorCode(p.error_code), f"PRODUCE to {topic.name}-{p.index}")
            offsets[(topic.name, p.index)] = int(p.base_offset)
    return offsets
