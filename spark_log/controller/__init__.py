"""spark_log.controller: the active controller of a cluster (Kafka's QuorumController), to come.

It will turn admin requests into metadata records and commit them through the quorum (`raft`),
and handle broker registration and heartbeats, fencing, leader election and ISR changes
(AlterPartition). It runs the pure state machines of `raft` and `metadata` on real files and
sockets.

May import metadata/, raft/, storage/, client/, protocol/, records/ and the small top-level
helpers; never the broker (brokers reach it through the wire), the data source or the CLI.
"""
