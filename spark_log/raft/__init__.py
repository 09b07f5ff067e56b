"""spark_log.raft: the controller quorum's replicated log, Kafka's KRaft (KIP-595), as a pure,
sans-I/O state machine.

A `RaftReplica` takes events in — the clock, RPC messages (Vote, BeginQuorumEpoch,
EndQuorumEpoch, Fetch, FetchSnapshot), records to append, snapshots taken — and returns actions
out: messages to send, election state to persist, batches to append and flush, snapshots to
save or load, the high watermark to commit to. The same code runs in the broker (which carries
out the actions on files and sockets) and under the deterministic simulator in tests/raft.

May import: the standard library's pure modules only. Never storage, the broker, clients, I/O,
the clock or randomness (time comes in with each event; randomness is injected).
"""
