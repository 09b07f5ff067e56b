"""The quorum simulator's checker: Raft's safety promises, checked at every step of a run
(`simulation`): at most one leader per epoch, leader completeness, committed records never lost
or changed, high watermarks that never go back, applied records a prefix of the committed log.
"""

from __future__ import annotations

from spark_log.raft.messages import Batch
from spark_log.raft.replica import RaftReplica
from spark_log.raft.replicated_log import ReplicatedLog


class Violation(AssertionError):
    """A promise of the quorum was broken."""


class Checker:
    def __init__(self) -> None:
        self.committed: list[tuple[int, int, bytes, bool]] = []  # (offset, epoch, record, ctl)
        self.commit_epochs: list[int] = []  # per committed offset: the first epoch it was in
        self.leaders: dict[int, int] = {}
        self.high_watermarks: dict[int, int] = {}

    def leader_elected(self, node: int, epoch: int, replica: RaftReplica) -> None:
        other = self.leaders.setdefault(epoch, node)
        if other != node:
            raise Violation(f"epoch {epoch} has two leaders: {other} and {node}")
        log = replica.log
        for offset, epoch_, record, control in self.committed[log.start_offset:]:
            if self.commit_epochs[offset] >= epoch:
                continue  # committed in this epoch or a later one: not this leader's to hold
            batch = _batch_at(log, offset)
            if batch is None or (batch.epoch, batch.records[offset - batch.base_offset],
                                 batch.control) != (epoch_, record, control):
                raise Violation(f"new leader {node} of epoch {epoch} lacks committed offset "
                                f"{offset} (has {batch})")

    def committed_to(self, node: int, hw: int, replica: RaftReplica) -> None:
        if hw < self.high_watermarks.get(node, -1):
            raise Violation(f"replica {node}'s high watermark went back to {hw}")
        self.high_watermarks[node] = hw
        log = replica.log
        for batch in log.batches:
            if batch.base_offset >= hw:
                break
            for i, record in enumerate(batch.records):
                offset = batch.base_offset + i
                entry = (offset, batch.epoch, record, batch.control)
                if offset < len(self.committed):
                    if self.committed[offset] != entry:
                        raise Violation(f"replica {node} commits {entry} where "
                                        f"{self.committed[offset]} was committed")
                    self.commit_epochs[offset] = min(self.commit_epochs[offset], replica.epoch)
                elif offset == len(self.committed):
                    self.committed.append(entry)
                    self.commit_epochs.append(replica.epoch)
                else:
                    raise Violation(f"replica {node} commits offset {offset} past the committed "
                                    f"end {len(self.committed)}")

    def applied(self, node: int, applied: list[tuple[int, bytes]]) -> None:
        records = [(o, r) for o, _, r, control in self.committed if not control]
        if applied != records[: len(applied)]:
            raise Violation(f"replica {node} applied records that are not a prefix of the "
                            f"committed log")

    def restarted(self, node: int) -> None:
        self.high_watermarks.pop(node, None)  # volatile: learnt again from the leader


def _batch_at(log: ReplicatedLog, offset: int) -> Batch | None:
    for batch in log.batches:
        if batch.base_offset <= offset <= batch.last_offset:
            return batch
    return None
