"""Kafka's names for a quorum replica's state (raft-metrics current-state), from real replicas
driven by hand: unattached, voted, candidate, leader, follower, observer, resigned."""

from __future__ import annotations

import random

from spark_log.broker.metrics.quorum_metrics import RAFT_STATES, raft_state
from spark_log.raft.config import QuorumConfig
from spark_log.raft.election_state import ElectionState
from spark_log.raft.messages import BeginQuorumEpochRequest, Message, VoteRequest
from spark_log.raft.replica import RaftReplica
from spark_log.raft.replicated_log import ReplicatedLog

VOTERS = frozenset({1, 2, 3})


def replica(node: int) -> RaftReplica:
    return RaftReplica(node, QuorumConfig(VOTERS), ElectionState(0), ReplicatedLog(), None, 0,
                       random.Random(1))


def test_each_state_has_kafkas_name() -> None:
    voter = replica(2)
    assert raft_state(voter) == "unattached"
    voter.receive(Message(1, 2, 1, VoteRequest(1, 1, 0, 0)), 1)
    assert raft_state(voter) == "voted"
    voter.receive(Message(1, 2, 2, BeginQuorumEpochRequest(1, 1)), 2)
    assert raft_state(voter) == "follower"
    observer = replica(4)
    observer.receive(Message(1, 4, 1, BeginQuorumEpochRequest(1, 1)), 1)
    assert raft_state(observer) == "observer"
    candidate = replica(1)
    candidate.tick(candidate.next_deadline())
    assert raft_state(candidate) == "candidate"
    alone = RaftReplica(1, QuorumConfig(frozenset({1})), ElectionState(0), ReplicatedLog(), None,
                        0, random.Random(1))
    alone.tick(0)
    assert raft_state(alone) == "leader"
    alone.resign(1)
    assert raft_state(alone) == "resigned"
    assert set(RAFT_STATES) == {"leader", "candidate", "voted", "follower", "unattached",
                                "observer", "resigned"}
