"""A replica's election state — the epoch it is in, the leader it knows, the candidate it voted
for — and its encoding as Kafka's `quorum-state` file (JSON).

This is what Raft's safety rests on across restarts: an epoch never goes back and a vote is
never cast twice in one epoch. It is written durably before any message that depends on it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from .messages import NO_LEADER

DATA_VERSION = 0


class ElectionStateError(ValueError):
    """A quorum-state file that cannot be trusted."""


@dataclass(frozen=True)
class ElectionState:
    epoch: int
    leader_id: int = NO_LEADER
    voted_id: int = NO_LEADER

    def encode(self, voters: frozenset[int]) -> bytes:
        doc = {"leaderId": self.leader_id, "leaderEpoch": self.epoch, "votedId": self.voted_id,
               "appliedOffset": 0, "currentVoters": [{"voterId": v} for v in sorted(voters)],
               "data_version": DATA_VERSION}
        return json.dumps(doc).encode()

    @staticmethod
    def decode(data: bytes) -> ElectionState:
        try:
            doc = json.loads(data)
            state = ElectionState(int(doc["leaderEpoch"]), int(doc["leaderId"]),
                                  int(doc["votedId"]))
        except (ValueError, KeyError, TypeError) as e:
            raise ElectionStateError(f"not a quorum-state document: {e}") from None
        if state.epoch < 0 or state.leader_id < NO_LEADER or state.voted_id < NO_LEADER:
            raise ElectionStateError(f"negative epoch or id in {state}")
        return state
