"""spark_log.metadata: the cluster's metadata as records — brokers, topics, partitions with their
replicas, leader, leader epoch and ISR, configs, producer-id blocks, features — and the image a
node builds by applying them in log order (Kafka's metadata records, MetadataImage and
MetadataDelta).

Pure: records in, image out. May import spark_log.records and spark_log.protocol (codecs) and the
standard library's pure modules; never storage, the broker, clients, I/O, the clock or randomness.

    metadata_topic.py        the metadata log's topic name, partition, ID and directory
    records.py               the record types (Kafka's names, api keys, versions, fields)
    codec.py                 record <-> __cluster_metadata record value bytes (MetadataRecordSerde)
    image.py, delta.py       MetadataImage; MetadataDelta replays records into the next image
    topics_delta.py          topic and partition records against the topics they change
    local_changes.py         what a delta changes for one broker (lead, follow, delete)
    replica_placement.py     striped rack-aware placement, explicit assignment checks
    partition_change.py      PartitionChangeBuilder: elections, ISR changes, brokers leaving
    reassignment.py          starting and cancelling partition reassignments
"""

from .broker_registration import BrokerRegistration, Endpoint, SecurityProtocol
from .codec import decode_record, decode_record_and_version, encode_record
from .delta import MetadataDelta, load_snapshot, replay_records
from .errors import (
    ImageError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    NoReassignmentInProgressError,
    PlacementError,
    RecordDecodeError,
    RecordEncodeError,
)
from .image import ConfigResource, ConfigResourceType, MetadataImage, Provenance, TopicImage
from .local_changes import LocalReplicaChanges, PartitionInfo, TopicPartition
from .partition_change import (
    Election,
    PartitionChangeResult,
    TargetChange,
    acceptable_leaders,
    build_partition_change,
    change_for_broker_joining,
    change_for_broker_leaving,
    elect_leader,
)
from .partition_registration import (
    NO_LEADER,
    NO_LEADER_CHANGE,
    LeaderRecoveryState,
    PartitionRegistration,
)
from .reassignment import cancel_reassignment, reassign
from .records import RECORD_TYPES, MetadataRecord
from .replica_placement import (
    UsableBroker,
    new_partition,
    place_replicas,
    usable_brokers,
    validate_manual_assignment,
)

__all__ = [
    "NO_LEADER",
    "NO_LEADER_CHANGE",
    "RECORD_TYPES",
    "BrokerRegistration",
    "ConfigResource",
    "ConfigResourceType",
    "Election",
    "Endpoint",
    "ImageError",
    "InvalidReplicaAssignmentError",
    "InvalidReplicationFactorError",
    "LeaderRecoveryState",
    "LocalReplicaChanges",
    "MetadataDelta",
    "MetadataImage",
    "MetadataRecord",
    "NoReassignmentInProgressError",
    "PartitionChangeResult",
    "PartitionInfo",
    "PartitionRegistration",
    "PlacementError",
    "Provenance",
    "RecordDecodeError",
    "RecordEncodeError",
    "SecurityProtocol",
    "TargetChange",
    "TopicImage",
    "TopicPartition",
    "UsableBroker",
    "acceptable_leaders",
    "build_partition_change",
    "cancel_reassignment",
    "change_for_broker_joining",
    "change_for_broker_leaving",
    "decode_record",
    "decode_record_and_version",
    "elect_leader",
    "encode_record",
    "load_snapshot",
    "new_partition",
    "place_replicas",
    "reassign",
    "replay_records",
    "usable_brokers",
    "validate_manual_assignment",
]
