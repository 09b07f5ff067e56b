"""The KRaft form of Fetch (api key 1, v13+) ⟷ raft's FetchRequest and FetchResponse, as
Kafka's KafkaRaftClient and RaftUtil fill it: one topic, the metadata topic named by its ID
(`METADATA_TOPIC_ID`), partition 0; the fetcher's id in `replica_state.replica_id` from v15
(`replica_id` before), its log end offset and last fetched epoch, the epoch it believes
current, the cluster id; the answer's `current_leader`, `high_watermark`, `log_start_offset`,
`diverging_epoch` (truncate first), `snapshot_id` (fetch that snapshot first) and the records as
RecordBatch bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spark_log.metadata.metadata_topic import METADATA_PARTITION, METADATA_TOPIC_ID
from spark_log.protocol.entity_build import ms
from spark_log.raft.messages import Batch, Error, FetchRequest, FetchResponse, OffsetAndEpoch
from spark_log.records import CorruptRecordError

from .batch_codec import decode_batches

FETCH = 1
FETCH_VERSIONS = range(13, 19)  # topic IDs from v13; Kafka's raft refuses a fetch without one
FETCH_SEND_VERSION = 16  # what two Kafka 3.7 controllers agree on
MAX_FETCH_BYTES = 8 << 20  # Kafka's KafkaRaftClient.MAX_FETCH_SIZE_BYTES

EncodeBatches = Callable[[tuple[Batch, ...]], bytes]


def fetch_request_fields(body: FetchRequest, cluster_id: str) -> dict[str, Any]:
    partition = {"partition": METADATA_PARTITION, "current_leader_epoch": body.current_leader_epoch,
                 "fetch_offset": body.fetch_offset, "last_fetched_epoch": body.last_fetched_epoch,
                 "log_start_offset": -1, "partition_max_bytes": 0, "replica_directory_id": None}
    return {"cluster_id": cluster_id, "replica_id": body.replica_id,
            "replica_state": {"replica_id": body.replica_id, "replica_epoch": -1},
            "max_wait": body.max_wait_ms, "min_bytes": 0, "max_bytes": MAX_FETCH_BYTES,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic_id": METADATA_TOPIC_ID, "partitions": [partition]}],
            "forgotten_topics_data": [], "rack_id": ""}


def fetch_request_body(request: Any) -> tuple[int, FetchRequest] | None:
    """(fetcher id, request) of a KRaft fetch; None if it is not one Kafka's raft accepts (not
    exactly partition 0 of the metadata topic, a negative offset, wait or replica id, a last
    fetched epoch past the epoch it names)."""
    topics = request.topics
    if len(topics) != 1 or topics[0].topic_id != METADATA_TOPIC_ID or \
            len(topics[0].partitions) != 1 or topics[0].partitions[0].partition != 0:
        return None
    p = topics[0].partitions[0]
    replica_id = request.replica_state.replica_id if request.__version__ >= 15 \
        else request.replica_id
    max_wait_ms = ms(request.max_wait)
    if replica_id < 0 or max_wait_ms < 0 or p.fetch_offset < 0 or p.last_fetched_epoch < 0 or \
            p.last_fetched_epoch > p.current_leader_epoch:
        return None
    return replica_id, FetchRequest(replica_id, p.current_leader_epoch, p.fetch_offset,
                                    p.last_fetched_epoch, max_wait_ms)


def fetch_response_fields(body: FetchResponse, encode: EncodeBatches) -> dict[str, Any]:
    partition = {
        "partition_index": METADATA_PARTITION, "error_code": int(body.error),
        "high_watermark": body.high_watermark, "last_stable_offset": -1,
        "log_start_offset": body.log_start_offset,
        "diverging_epoch": _epoch_end_offset(body.diverging),
        "current_leader": {"leader_id": body.leader_id, "leader_epoch": body.leader_epoch},
        "snapshot_id": _epoch_end_offset(body.snapshot_id), "aborted_transactions": None,
        "preferred_read_replica": -1, "records": encode(body.batches) if body.batches else b""}
    return {"throttle_time": 0, "error_code": 0, "session_id": 0,
            "responses": [{"topic_id": METADATA_TOPIC_ID, "partitions": [partition]}],
            "node_endpoints": []}


def fetch_response_body(response: Any) -> FetchResponse:
    """raft's FetchResponse; ValueError if the response is not one (a top-level error, another
    topic, an error raft does not know, records that do not decode)."""
    if response.error_code != 0:
        raise ValueError(f"top-level error {response.error_code.name}")
    topics = response.responses
    if len(topics) != 1 or topics[0].topic_id != METADATA_TOPIC_ID or \
            len(topics[0].partitions) != 1 or topics[0].partitions[0].partition_index != 0:
        raise ValueError("not an answer about the metadata partition")
    p = topics[0].partitions[0]
    try:
        batches = tuple(decode_batches(p.records or b"", allow_partial_tail=True))
    except CorruptRecordError as e:
        raise ValueError(f"records that do not decode: {e}") from None
    return FetchResponse(Error(int(p.error_code)), p.current_leader.leader_epoch,
                         p.current_leader.leader_id, p.high_watermark, p.log_start_offset,
                         batches, _offset_and_epoch(p.diverging_epoch),
                         _offset_and_epoch(p.snapshot_id))


def _epoch_end_offset(value: OffsetAndEpoch | None) -> dict[str, int]:
    if value is None:
        return {"epoch": -1, "end_offset": -1}
    return {"epoch": value.epoch, "end_offset": value.offset}


def _offset_and_epoch(value: Any) -> OffsetAndEpoch | None:
    """Kafka's "unset" is -1 in both fields."""
    if value.epoch == -1 and value.end_offset == -1:
        return None
    return OffsetAndEpoch(value.end_offset, value.epoch)
