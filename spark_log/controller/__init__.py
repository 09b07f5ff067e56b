"""spark_log.controller: the active controller of a cluster (Kafka's QuorumController), to come.

It will turn admin requests into metadata records and commit them through the quorum (`raft`),
and handle broker registration and heartbeats, fencing, leader election and ISR changes
(AlterPartition). It runs the pure state machines of `raft` and `metadata` on real files and
sockets.

The controller's decisions (Kafka's control managers) are pure and synchronous: each takes the
working image and a request (time, randomness and the next log offset passed in) and returns a
`ControllerResult`, the records to append and the response to send once they commit:

    controller_result.py     ControllerResult, ApiError, ControllerError, kio responses
    controller_settings.py   the settings decisions read (Kafka's names and defaults)
    working_image.py         the committed image plus the appended, uncommitted batches
    broker_heartbeats.py     broker sessions: the soft state kept outside the log
    cluster_control.py       BrokerRegistration, BrokerHeartbeat, UnregisterBroker, expiry
    broker_leadership.py     the records a broker fenced, unfenced, shutting down calls for
    replication_control.py   CreateTopics, CreatePartitions (AlterPartition: next stage)
    topic_deletion.py        DeleteTopics
    leader_election.py       ElectLeaders, the preferred-leader rebalance, unclean elections
    topic_configs.py         a topic's effective configs and their checks
    config_control.py        IncrementalAlterConfigs, AlterConfigs
    producer_id_control.py   AllocateProducerIds
    feature_control.py       bootstrap records, finalized features, record versions
    metadata_snapshot.py     snapshots in Kafka's format, and when to take one

The quorum's driver runs `raft`'s RaftReplica on real files and sockets (Kafka's
KafkaRaftClientDriver, KafkaMetadataLog and KafkaNetworkChannel):

    raft_driver.py           RaftDriver: the timer, actions carried out in order, requests
                             answered; propose, wait_committed, listeners, snapshots, resign
    raft_delivery.py         committed batches, snapshots and leader changes handed up in order
    metadata_log.py          __cluster_metadata-0/: segments, quorum-state, snapshot files
    quorum_state_file.py     the quorum-state file (refused when damaged, never guessed)
    snapshot_files.py        <end offset>-<epoch>.checkpoint files, written atomically
    batch_codec.py           raft batches <-> RecordBatches (LeaderChangeMessage control batches)
    raft_codec.py            Vote, Begin/EndQuorumEpoch, FetchSnapshot <-> kio entities
    fetch_codec.py           the KRaft Fetch (the metadata topic by its ID) <-> raft's fetch
    quorum_description.py    DescribeQuorum: the leader's view of voters and observers
    quorum_channel.py        connections to the other voters, correlation ids, reconnects
    metadata_topic.py        the metadata topic's name, partition and ID
    quorum_errors.py         MetadataLogError, DriverStoppedError, ProposalLostError

May import metadata/, raft/, storage/, client/, protocol/, records/ and the small top-level
helpers; never the broker (brokers reach it through the wire), the data source or the CLI.
"""
