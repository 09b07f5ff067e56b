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
# Answers of a partition whose leader is moving or whose ISR is recovering: sent again.
_LEADER_MOVING = frozenset({
    ErrorCode.not_leader_or_follower, ErrorCode.leader_not_available,
    ErrorCode.unknown_topic_or_partition, ErrorCode.not_enough_replicas,
    ErrorCode.not_enough_replicas_after_append, ErrorCode.request_timed_out,
    ErrorCode.kafka_storage_error})


def append(client: WireClient, records: Mapping[TopicPartition, Sequence[KeyValue]], *,
           transactional_id: str | None = None, producer_id: int = -1, epoch: int = -1
           ) -> dict[TopicPartition, int]:
    """Append `records` (key, value pairs per partition); returns each partition's base
    offset. A partition whose leader moves or dies is sent again to its new leader within the
    client's timeout (a transactional batch keeps its sequence, so a copy the old leader
    already replicated is recognised as a duplicate). Raises WireError for a partition the
    leader refuses, or that finds no leader in time."""
    now = int(time.time() * 1000)
    pending = {tp: build_batch([Record(i, now, k, v) for i, (k, v) in enumerate(pairs)],
                               producer_id=producer_id, producer_epoch=epoch,
                               base_sequence=0 if transactional_id else -1,
                               is_transactional=transactional_id is not None)
               for tp, pairs in records.items()}
    offsets: dict[TopicPartition, int] = {}
    deadline = time.monotonic() + client.timeout_s
    backoff = 0.05
    while True:
        failure = _send_round(client, pending, offsets, transactional_id)
        if not pending:
            return offsets
        if time.monotonic() + backoff > deadline:
            raise failure
        client.close()  # forget connections to brokers that died
        time.sleep(backoff)
        backoff = min(backoff * 2, 1.0)


def _send_round(client: WireClient, pending: dict[TopicPartition, bytes],
                offsets: dict[TopicPartition, int], transactional_id: str | None) -> WireError:
    """Send every pending batch to its leader as the metadata names it now; what was written
    moves from `pending` to `offsets`. Returns why the rest is still pending."""
    failure = WireError(ErrorCode.leader_not_available, "PRODUCE: no leader answered")
    try:
        leaders = client.leaders(topic for topic, _ in pending)
    except OSError:
        return failure
    by_leader: dict[str, dict[TopicPartition, bytes]] = {}
    for tp, batch in pending.items():
        if tp in leaders:
            by_leader.setdefault(leaders[tp], {})[tp] = batch
        else:
            failure = WireError(ErrorCode.unknown_topic_or_partition, f"no leader for {tp}")
    for address, batches in by_leader.items():
        try:
            answers = _produce(client, address, batches, transactional_id)
        except OSError:
            continue
        for tp, (code, offset) in answers.items():
            if code == ErrorCode.none:
                offsets[tp] = offset
                del pending[tp]
            elif code in _LEADER_MOVING:
                failure = WireError(code, f"PRODUCE to {tp[0]}-{tp[1]}")
            else:
                raise WireError(code, f"PRODUCE to {tp[0]}-{tp[1]}")
    return failure


def _produce(client: WireClient, address: str, batches: Mapping[TopicPartition, bytes],
             transactional_id: str | None) -> dict[TopicPartition, tuple[ErrorCode, int]]:
    by_topic: dict[str, list[dict[str, object]]] = {}
    for (topic, partition), batch in sorted(batches.items()):
        by_topic.setdefault(topic, []).append({"index": partition, "records": batch})
    answer = client.request(address, ApiKey.PRODUCE, PRODUCE_VERSION, {
        "transactional_id": transactional_id, "acks": -1,
        "timeout": dt.timedelta(seconds=client.timeout_s),
        "topic_data": [{"name": t, "partition_data": ps} for t, ps in by_topic.items()]})
    return {(topic.name, p.index): (ErrorCode(p.error_code), int(p.base_offset))
            for topic in answer.responses for p in topic.partition_responses}
