"""spark_log.controller: the controller of a cluster (Kafka's QuorumController) and the quorum
it runs on.

It turns the requests brokers forward into metadata records and commits them through the
quorum (`raft`): broker registration and heartbeats, fencing, topics, configs, producer-id
blocks, leader elections, ISR changes (AlterPartition). It runs the pure state
machines of `raft` and `metadata` on real files and sockets:

    quorum_controller.py     QuorumController: follows the committed log on every controller;
                             on the quorum's leader, decides, proposes, answers once committed
    controller_apis.py       the APIs served: each one's decision and NOT_CONTROLLER answer
    controller_log.py        the working image fed by committed batches, snapshots, proposals
    controller_timers.py     session expiry, leader rebalance, unclean elections on timers
    controller_config.py     ControllerSettings and ControllerTimings from the node's settings

Every node, controller or broker, follows the committed log into metadata images:

    metadata_loader.py       MetadataLoader: committed batches and snapshots -> images, to
                             its publishers in log order
    metadata_transactions.py metadata transactions (KIP-868) as a reader of the log sees them
    snapshot_generator.py    SnapshotGenerator: a snapshot of the image once it is due

The controller's decisions (Kafka's control managers) are pure and synchronous: each takes the
working image and a request (time, randomness and the next log offset passed in) and returns a
`ControllerResult`, the records to append and the response to send once they commit:

    controller_result.py     ControllerResult, ApiError, ControllerError, kio responses
    controller_settings.py   the settings decisions read (Kafka's names and defaults)
    working_image.py         the committed image plus the appended, uncommitted batches
    broker_heartbeats.py     broker sessions: the soft state kept outside the log
    cluster_control.py       BrokerRegistration, BrokerHeartbeat, UnregisterBroker, expiry
    broker_leadership.py     the records a broker fenced, unfenced, shutting down calls for
    replication_control.py   CreateTopics, CreatePartitions
    alter_partition.py       AlterPartition: a leader's ISR changes
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
    quorum_errors.py         MetadataLogError, DriverStoppedError, ProposalLostError

May import node_config/, metadata/, raft/, storage/, client/, protocol/, records/ and the small
top-level helpers; never the broker (brokers reach it through the wire), the data source or
the CLI.
"""
