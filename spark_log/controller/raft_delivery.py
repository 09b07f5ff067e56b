"""What the quorum tells the layers above it, in order: leader changes, snapshots to load,
committed batches; and the waits for proposed records to be committed.

News is queued while a step of the replica is carried out and handed over after it, one item
at a time and never re-entrantly: a listener may propose records or take a snapshot (a new
step), and what that step brings is delivered after the listener returns, still in order.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from spark_log.raft.messages import Batch, OffsetAndEpoch
from spark_log.raft.replica import RaftReplica

from .quorum_errors import DriverStoppedError, ProposalLostError

CommitListener = Callable[[Sequence[Batch]], None]
SnapshotListener = Callable[[OffsetAndEpoch, bytes], None]
LeaderListener = Callable[[int, int], None]  # (epoch, leader id or -1)

MAX_OUTCOMES = 1024


@dataclass
class Listeners:
    commit: list[CommitListener] = field(default_factory=list)
    snapshot: list[SnapshotListener] = field(default_factory=list)
    leader: list[LeaderListener] = field(default_factory=list)


class Delivery:
    """Invariants: committed batches are delivered once each, in offset order, from `applied`
    on (a loaded snapshot moves `applied` to its end offset first); a proposal's wait ends as
    soon as the committed log decides it (its batch committed at its offset; or replaced: another
    batch committed there, or one of a later epoch at or below it), or with the driver's stop.
    Not thread-safe."""

    def __init__(self, applied: int) -> None:
        self.listeners = Listeners()
        self.applied = applied
        self._news: deque[tuple[str, tuple[object, ...]]] = deque()
        self._delivering = False
        self._proposals: dict[int, int] = {}  # base offset -> epoch it was proposed in
        self._outcomes: OrderedDict[int, BaseException | None] = OrderedDict()
        self._waiters: dict[int, list[asyncio.Future[None]]] = {}
        self._stopped: BaseException | None = None

    # ---- news -------------------------------------------------------------------------------
    def leader_changed(self, epoch: int, leader_id: int) -> None:
        self._news.append(("leader", (epoch, leader_id)))

    def snapshot_loaded(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        self._news.append(("snapshot", (snapshot_id, data)))

    def committed(self) -> None:
        if not self._news or self._news[-1][0] != "commit":
            self._news.append(("commit", ()))

    def deliver(self, replica: RaftReplica) -> None:
        """Hand over the queued news (a no-op when called from inside a listener)."""
        if self._delivering:
            return
        self._delivering = True
        try:
            while self._news and self._stopped is None:
                kind, args = self._news.popleft()
                if kind == "leader":
                    for on_leader in list(self.listeners.leader):
                        on_leader(*args)  # type: ignore[arg-type]
                elif kind == "snapshot":
                    self._load_snapshot(*args)  # type: ignore[arg-type]
                else:
                    self._deliver_committed(replica)
        finally:
            self._delivering = False

    def _load_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        self.applied = snapshot_id.offset
        for offset in [o for o in self._proposals if o < snapshot_id.offset]:
            self._settle(offset, ProposalLostError(
                f"the records proposed at offset {offset} are covered by a snapshot from the "
                f"leader ({snapshot_id}): whether they were committed is not known"))
        for offset in [o for o in self._proposals if self._proposals[o] < snapshot_id.epoch]:
            self._settle(offset, ProposalLostError(  # as in _settle_batch: a later epoch below
                f"the records proposed at offset {offset} in epoch {self._proposals[offset]} "
                f"were replaced: the leader's snapshot {snapshot_id} ends in a later epoch"))
        for on_snapshot in list(self.listeners.snapshot):
            on_snapshot(snapshot_id, data)

    def _deliver_committed(self, replica: RaftReplica) -> None:
        if self.applied < replica.log.start_offset:
            return  # a snapshot to load comes first
        batches = replica.committed(self.applied)
        if not batches:
            return
        for on_commit in list(self.listeners.commit):
            on_commit(batches)
        self.applied = batches[-1].next_offset
        for batch in batches:
            self._settle_batch(batch)

    # ---- proposals --------------------------------------------------------------------------
    def proposed(self, offset: int, epoch: int) -> None:
        """Records were proposed at `offset` in `epoch`. An offset is proposed again only after
        the log was cut below it: an outcome kept for the earlier proposal is not this one's,
        and an earlier proposal still waiting can no longer be told apart from this one."""
        earlier = self._proposals.get(offset)
        if earlier is not None and earlier != epoch:
            self._settle(offset, ProposalLostError(
                f"the records proposed at offset {offset} in epoch {earlier} left this "
                f"replica's log, which holds others proposed there in epoch {epoch}: whether "
                f"they were committed is not known"))
        self._outcomes.pop(offset, None)
        self._proposals[offset] = epoch

    async def wait(self, offset: int) -> None:
        """Until the records proposed at `offset` are committed (ProposalLostError if other
        records were committed there)."""
        if self._stopped is not None:
            raise DriverStoppedError("the raft driver is stopped") from self._stopped
        if offset in self._outcomes:
            outcome = self._outcomes[offset]
            if outcome is not None:
                raise outcome
            return
        if offset < self.applied and offset not in self._proposals:
            return  # committed before anything was proposed here: nothing to compare with
        future = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(offset, []).append(future)
        await future

    def _settle_batch(self, batch: Batch) -> None:
        # Epochs never decrease along a log, so a committed batch of a later epoch at or below
        # a proposal's offset means no log that will ever be committed holds that proposal,
        # even when nothing has been committed at its own offset yet (a new leader whose log
        # was shorter commits its epoch-start record below it, and may commit nothing more).
        for offset in [o for o in self._proposals if batch.base_offset <= o and
                       (o < batch.next_offset or batch.epoch > self._proposals[o])]:
            epoch = self._proposals[offset]
            lost = None if (offset, epoch) == (batch.base_offset, batch.epoch) else \
                ProposalLostError(f"the records proposed at offset {offset} in epoch {epoch} "
                                  f"were replaced by the leader of epoch {batch.epoch}")
            self._settle(offset, lost)
        for offset in [o for o in self._waiters if o < batch.next_offset and
                       o not in self._outcomes]:
            self._settle(offset, None)

    def _settle(self, offset: int, outcome: BaseException | None) -> None:
        self._proposals.pop(offset, None)
        self._outcomes[offset] = outcome
        while len(self._outcomes) > MAX_OUTCOMES:
            self._outcomes.popitem(last=False)
        for future in self._waiters.pop(offset, []):
            if not future.done():
                if outcome is None:
                    future.set_result(None)
                else:
                    future.set_exception(outcome)

    def stop(self, cause: BaseException | None) -> None:
        """End every wait: the driver stopped."""
        self._stopped = cause or DriverStoppedError("the raft driver is closed")
        for futures in self._waiters.values():
            for future in futures:
                if not future.done():
                    future.set_exception(DriverStoppedError("the raft driver stopped"))
        self._waiters.clear()
