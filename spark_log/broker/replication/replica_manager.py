"""The partitions this broker hosts, as leader or follower (Kafka's ReplicaManager + purgatory).

Each hosted partition's state — leader, leader epoch, replicas, ISR — comes from the cluster
metadata (`update_partition`, called by the metadata publisher, in log order). Where this broker
leads, a `LeaderPartition` (spark_log.replication) tracks the followers: client appends go to
the log stamped with the leader epoch, followers' fetches say how far their logs reach, and the
high watermark — what consumers may read and what acks=all waits for — moves to the smallest
log end offset in the ISR. ISR changes are proposed to the controller (`IsrChanges`) and take
effect when the metadata commits them. Where this broker follows, the partition is handed to
the replica fetchers (`Followers`), which append what the leader sends (`append_as_follower`)
and truncate where the leader says the logs diverge.

Appends, consumer reads and ListOffsets go to the leader only: elsewhere they fail with
NOT_LEADER_OR_FOLLOWER naming the current leader (KIP-951). Anything parked — a long-polling
fetch, an acks=all produce — waits on the partition and is woken by every append, high
watermark move, ISR change and leadership change.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from spark_log.broker.errors import KafkaError, UnknownTopicError
from spark_log.broker.replication.leader_epochs import NotLeaderError, check_leader_epoch
from spark_log.broker.replication.partition_waiters import PartitionWaiters
from spark_log.broker.replication.replication_quota import ReplicationQuotas
from spark_log.clock import Clock
from spark_log.metadata import PartitionRegistration
from spark_log.protocol import ErrorCode
from spark_log.replication.leader_partition import IsrChange, LeaderPartition
from spark_log.storage.append_info import AppendInfo, AppendOrigin
from spark_log.storage.errors import OffsetOutOfRangeError
from spark_log.storage.log.file_records import EMPTY_SLICE, FetchSlice
from spark_log.storage.log.log_manager import LogManager
from spark_log.storage.log.partition_log import PartitionLog

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
UNDEFINED = -1


class Followers(Protocol):
    """The replica fetchers, as far as the replica manager drives them."""

    def follow(self, topic: str, partition: int, leader: int, leader_epoch: int) -> None: ...

    def unfollow(self, topic: str, partition: int) -> None: ...


class IsrChanges(Protocol):
    """Where ISR changes go (AlterPartition to the controller)."""

    def propose(self, topic: str, partition: int, change: IsrChange) -> None: ...


class _NoFollowers:
    def follow(self, topic: str, partition: int, leader: int, leader_epoch: int) -> None:
        pass

    def unfollow(self, topic: str, partition: int) -> None:
        pass


class _NoIsrChanges:
    def propose(self, topic: str, partition: int, change: IsrChange) -> None:
        pass


class LedPartition(NamedTuple):
    """A partition led here, as metrics see it."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    min_insync_replicas: int


class FollowerRead(NamedTuple):
    """The leader's answer to a follower's fetch of one partition."""

    records: FetchSlice
    high_watermark: int
    log_start_offset: int
    diverging: tuple[int, int] | None  # (epoch, end offset) where the follower's log diverges


@dataclass(frozen=True)
class ReplicationSettings:
    """The broker settings replication reads."""

    replica_lag_time_max_ms: int = 30000


class ReplicaManager:
    """Appends and reads partition logs, tracks replication, wakes what is parked.

    Invariants: a partition is appended to by clients and read by consumers only while the
    metadata says this broker leads it, and then it has a `LeaderPartition` at the metadata's
    leader epoch; a leader's log high watermark is its `LeaderPartition`'s and never moves back;
    a follower's high watermark is at most the leader's and its own log end. Not thread-safe:
    used from the broker's event loop only.
    """

    def __init__(self, logs: LogManager, node_id: int, clock: Clock | None = None,
                 settings: ReplicationSettings | None = None) -> None:
        self.logs = logs
        self.node_id = node_id
        self.clock = clock if clock is not None else logs.clock
        self.settings = settings or ReplicationSettings()
        self.followers: Followers = _NoFollowers()
        self.isr_changes: IsrChanges = _NoIsrChanges()
        self.quotas: ReplicationQuotas | None = None  # replication throttles, if any
        self._states: dict[TopicPartition, PartitionRegistration] = {}
        self._leaders: dict[TopicPartition, LeaderPartition] = {}
        self.waiters = PartitionWaiters()
        # Where the latest coordinator write to each partition ends, until it is replicated.
        self._coordinator_writes: dict[TopicPartition, int] = {}

    # ---- leadership, from the metadata -----------------------------------------------------
    def update_partition(self, topic: str, partition: int, state: PartitionRegistration) -> None:
        key = (topic, partition)
        self._states[key] = state
        if state.leader == self.node_id:
            self.followers.unfollow(topic, partition)
            current = self._leaders.get(key)
            if current is None or current.leader_epoch != state.leader_epoch:
                self._become_leader(key, state)
            else:
                self._leader_state_changed(key, current, state)
        else:
            self._coordinator_writes.pop(key, None)  # waiters see the leadership gone
            if self._leaders.pop(key, None) is not None:
                log.info("%s-%d: no longer the leader (now %d, epoch %d)", topic, partition,
                         state.leader, state.leader_epoch)
            if state.leader >= 0 and self.node_id in state.replicas:
                self.followers.follow(topic, partition, state.leader, state.leader_epoch)
            else:
                self.followers.unfollow(topic, partition)
        self._wake(key)

    def forget_partition(self, topic: str, partition: int) -> None:
        self.followers.unfollow(topic, partition)
        self._leaders.pop((topic, partition), None)
        self._coordinator_writes.pop((topic, partition), None)
        if self._states.pop((topic, partition), None) is not None:
            self._wake((topic, partition))

    def _become_leader(self, key: TopicPartition, state: PartitionRegistration) -> None:
        target = self.logs.get(*key)
        if target is None:
            return
        end = target.log_end_offset
        latest = target.leader_epoch_cache.latest_epoch()
        if latest is None or state.leader_epoch > latest:
            # The epoch starts here even before its first append: a follower asking where an
            # older epoch ends is told this offset (KIP-101). It reaches the file when the log
            # flushes past it (see leader_epoch.py).
            target.leader_epoch_cache.assign(state.leader_epoch, end)
        isr = state.isr if self.node_id in state.isr else (*state.isr, self.node_id)
        leader = LeaderPartition(
            node_id=self.node_id, leader_epoch=state.leader_epoch,
            partition_epoch=state.partition_epoch, replicas=tuple(state.replicas),
            isr=tuple(isr), log_end_offset=end, high_watermark=target.high_watermark,
            epoch_start_offset=end, started_ms=self.clock.now_ms())
        self._leaders[key] = leader
        leader.appended(end)  # alone in the ISR, everything it holds is committed
        target.update_high_watermark(leader.high_watermark)
        log.info("%s: leader at epoch %d (ISR %s, log end %d, high watermark %d)",
                 target.name, state.leader_epoch, list(isr), end, leader.high_watermark)

    def _leader_state_changed(self, key: TopicPartition, leader: LeaderPartition,
                              state: PartitionRegistration) -> None:
        if tuple(state.replicas) != leader.replicas:  # a reassignment added or removed some
            leader.set_replicas(tuple(state.replicas))
        if self.node_id in state.isr and leader.isr_committed(tuple(state.isr),
                                                               state.partition_epoch):
            self._high_watermark_moved(key, leader)

    # ---- what handlers ask -----------------------------------------------------------------
    def state(self, topic: str, partition: int) -> PartitionRegistration:
        found = self._states.get((topic, partition))
        if found is None:
            raise UnknownTopicError(f"{topic}-{partition}")
        return found

    def leader_epoch(self, topic: str, partition: int) -> int:
        return self.state(topic, partition).leader_epoch

    def check_leader_epoch(self, topic: str, partition: int, current: int) -> None:
        check_leader_epoch(current, self.leader_epoch(topic, partition))

    def log(self, topic: str, partition: int) -> PartitionLog:
        """The log of a partition this broker leads."""
        return self._led((topic, partition))[1]

    def log_at_epoch(self, topic: str, partition: int, epoch: int) -> PartitionLog:
        """`check_leader_epoch`, then `log`: what a consumer's fetch asks of each partition
        (each map looked up once: this runs for every partition of every fetch)."""
        state = self.state(topic, partition)
        check_leader_epoch(epoch, state.leader_epoch)
        found = self.logs.get(topic, partition)
        if found is None or state.leader != self.node_id or (topic, partition) not in self._leaders:
            return self._led((topic, partition))[1]  # raises what is wrong
        return found

    def _led(self, key: TopicPartition) -> tuple[LeaderPartition, PartitionLog]:
        """The leader state and log of a partition this broker leads."""
        leader, found = self._leader(key), self.logs.get(*key)
        if found is None:
            raise UnknownTopicError(f"{key[0]}-{key[1]}")
        return leader, found

    def _leader(self, key: TopicPartition) -> LeaderPartition:
        state = self.state(*key)
        leader = self._leaders.get(key)
        if state.leader != self.node_id or leader is None:
            raise NotLeaderError(key[0], key[1], state.leader, state.leader_epoch)
        return leader

    def high_watermark_settled(self, topic: str, partition: int) -> bool:
        """Whether a partition led here has its high watermark at least where its leader's
        epoch began: until then a new leader's high watermark may lag the old leader's, and
        ListOffsets answers OFFSET_NOT_AVAILABLE (KIP-207) rather than an offset that went
        back."""
        leader = self._leader((topic, partition))
        return leader.high_watermark >= leader.epoch_start_offset

    def led_partitions(self) -> list[LedPartition]:
        """Every partition led here with its replicas and committed ISR."""
        out = []
        for (topic, partition), leader in self._leaders.items():
            target = self.logs.get(topic, partition)
            if target is not None:
                out.append(LedPartition(topic, partition, leader.replicas, leader.isr,
                                        target.config.min_insync_replicas))
        return out

    def isr(self, topic: str, partition: int) -> tuple[int, ...]:
        """The committed ISR of a partition led here."""
        return self._leader((topic, partition)).isr

    # ---- the leader's log ------------------------------------------------------------------
    def append(self, topic: str, partition: int, records: bytes | memoryview,
               origin: AppendOrigin = AppendOrigin.CLIENT, required_acks: int = 1) -> AppendInfo:
        """Append to a partition led here. With `required_acks` -1 the ISR must hold at least
        min.insync.replicas members first (NOT_ENOUGH_REPLICAS)."""
        key = (topic, partition)
        leader, target = self._led(key)
        if required_acks == -1 and leader.under_min_isr(target.config.min_insync_replicas):
            raise KafkaError(
                ErrorCode.not_enough_replicas,
                f"The ISR of {target.name} is {list(leader.isr)}: fewer than "
                f"min.insync.replicas={target.config.min_insync_replicas}")
        info = target.append(records, leader_epoch=leader.leader_epoch, origin=origin)
        if leader.appended(target.log_end_offset):
            target.update_high_watermark(leader.high_watermark)
        if origin is AppendOrigin.COORDINATOR and leader.high_watermark < info.last_offset + 1:
            self._coordinator_writes[key] = info.last_offset + 1
        self._wake(key)
        return info

    def coordinator_writes_pending(self, partitions: Iterable[TopicPartition]) -> bool:
        """Whether a coordinator write to one of `partitions` is not yet replicated."""
        return any(key in self._coordinator_writes for key in partitions)

    async def coordinator_writes_replicated(
            self, timeout_s: float, partitions: Iterable[TopicPartition] | None = None) -> bool:
        """Wait until every coordinator write made so far (to `partitions`, default all) is on
        every ISR member — what a coordinator's answer must wait for, as Kafka's coordinators
        append with acks=all. False if one cannot be (leadership moved, or `timeout_s`)."""
        keys = list(self._coordinator_writes) if partitions is None else \
            [k for k in partitions if k in self._coordinator_writes]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        for key in keys:
            end = self._coordinator_writes.get(key)
            if end is None:
                continue
            code = await self.until_replicated(*key, end, max(0.0, deadline - loop.time()))
            if code not in (ErrorCode.none, ErrorCode.not_enough_replicas_after_append):
                return False
            if self._coordinator_writes.get(key) == end:
                del self._coordinator_writes[key]
        return True

    def replicated(self, topic: str, partition: int, next_offset: int) -> bool:
        """Whether an acks=all wait for the log below `next_offset` would end at once (every
        ISR member has it, or the partition is no longer led here)."""
        leader = self._leaders.get((topic, partition))
        return leader is None or leader.high_watermark >= next_offset

    async def until_replicated(self, topic: str, partition: int, next_offset: int,
                               timeout_s: float) -> int:
        """Wait until every ISR member has the log below `next_offset` (acks=all); the error
        code to answer: none, NOT_ENOUGH_REPLICAS_AFTER_APPEND (the high watermark got there
        with the ISR below min.insync.replicas), NOT_LEADER_OR_FOLLOWER (leadership moved)
        or REQUEST_TIMED_OUT."""
        key = (topic, partition)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            leader = self._leaders.get(key)
            target = self.logs.get(topic, partition)
            if leader is None or target is None:
                return ErrorCode.not_leader_or_follower
            done = leader.acks_all_done(next_offset, target.config.min_insync_replicas)
            if done is not None:
                return ErrorCode.none if done else ErrorCode.not_enough_replicas_after_append
            remaining = deadline - loop.time()
            if remaining <= 0:
                return ErrorCode.request_timed_out
            await self.waiters.wait([key], remaining)

    def last_stable_offset(self, target: PartitionLog) -> int:
        """The offset below which no transaction is open (at most the high watermark)."""
        return target.last_stable_offset

    # ---- followers' fetches, at the leader ---------------------------------------------------
    def read_for_follower(self, topic: str, partition: int, replica_id: int, fetch_offset: int,
                          last_fetched_epoch: int, max_bytes: int, first: bool) -> FollowerRead:
        """A follower's fetch: the records from `fetch_offset` up to the log end, or where its
        log diverges from this one (KIP-320: its last fetched epoch ends earlier here, or is
        unknown here). The fetch offset tells how far the follower's log reaches."""
        key = (topic, partition)
        leader = self._leader(key)
        target = self.log(topic, partition)
        if replica_id not in leader.followers:
            raise KafkaError(ErrorCode.not_leader_or_follower,
                             f"Broker {replica_id} is not a replica of {target.name} "
                             f"(replicas {list(leader.replicas)})")
        if last_fetched_epoch >= 0:
            epoch, end = target.leader_epoch_cache.end_offset_for(last_fetched_epoch,
                                                                  target.log_end_offset)
            if epoch == UNDEFINED or end == UNDEFINED:
                raise OffsetOutOfRangeError(
                    f"{target.name}: the end of epoch {last_fetched_epoch} is unknown here")
            if fetch_offset < target.log_start_offset:
                raise OffsetOutOfRangeError(
                    f"{target.name}: offset {fetch_offset} is below the log start offset "
                    f"{target.log_start_offset}")
            if epoch < last_fetched_epoch or end < fetch_offset:
                return FollowerRead(target.read(target.log_end_offset, 0), target.high_watermark,
                                    target.log_start_offset, (epoch, end))
        throttled = self.quotas is not None and replica_id not in leader.isr and \
            self.quotas.throttled("leader", topic, partition, self.node_id)
        if throttled and self.quotas is not None and self.quotas.exceeded("leader"):
            records = EMPTY_SLICE  # a throttled replica catching up waits for the rate
        else:
            records = target.read(fetch_offset, max_bytes, min_one_batch=first)
            if throttled and self.quotas is not None:
                self.quotas.record("leader", records.size)
        if leader.follower_fetched(replica_id, fetch_offset, self.clock.now_ms()):
            self._high_watermark_moved(key, leader)
        change = leader.expansion(replica_id)
        if change is not None:
            log.info("%s: proposing ISR %s (follower %d caught up)", target.name,
                     list(change.isr), replica_id)
            self.isr_changes.propose(topic, partition, change)
        return FollowerRead(records, target.high_watermark, target.log_start_offset, None)

    def pending_isr_change(self, topic: str, partition: int) -> IsrChange | None:
        leader = self._leaders.get((topic, partition))
        return None if leader is None else leader.pending

    def isr_change_refused(self, topic: str, partition: int, change: IsrChange) -> None:
        """The controller refused `change` for good: drop it, so a new one can be proposed."""
        leader = self._leaders.get((topic, partition))
        if leader is not None and leader.pending == change:
            leader.isr_change_failed()  # the follower's next fetch may propose it again

    def isr_change_committed(self, topic: str, partition: int, isr: tuple[int, ...],
                             partition_epoch: int) -> None:
        """The controller's answer committed this ISR (the metadata will say so too)."""
        key = (topic, partition)
        leader = self._leaders.get(key)
        if leader is not None and self.node_id in isr and \
                leader.isr_committed(isr, partition_epoch):
            self._high_watermark_moved(key, leader)
        self._wake(key)

    def shrink_isrs(self) -> None:
        """Periodic: propose dropping ISR members not caught up for replica.lag.time.max.ms."""
        now = self.clock.now_ms()
        for (topic, partition), leader in list(self._leaders.items()):
            change = leader.shrink(now, self.settings.replica_lag_time_max_ms)
            if change is not None:
                log.info("%s-%d: proposing ISR %s (was %s; members behind for more than %d ms)",
                         topic, partition, list(change.isr), list(leader.isr),
                         self.settings.replica_lag_time_max_ms)
                self.isr_changes.propose(topic, partition, change)

    def _high_watermark_moved(self, key: TopicPartition, leader: LeaderPartition) -> None:
        target = self.logs.get(*key)
        if target is not None:
            target.update_high_watermark(leader.high_watermark)
        self._wake(key)

    # ---- the follower's log ----------------------------------------------------------------
    def in_sync(self, topic: str, partition: int) -> bool:
        """Whether the metadata has this broker in the partition's ISR."""
        state = self._states.get((topic, partition))
        return state is not None and self.node_id in state.isr

    def follower_log(self, topic: str, partition: int, leader_epoch: int) -> PartitionLog:
        """The log of a partition this broker follows at `leader_epoch` (the fetcher's view
        may be stale: then NOT_LEADER_OR_FOLLOWER)."""
        state = self.state(topic, partition)
        if state.leader == self.node_id or state.leader_epoch != leader_epoch:
            raise NotLeaderError(topic, partition, state.leader, state.leader_epoch)
        found = self.logs.get(topic, partition)
        if found is None:
            raise UnknownTopicError(f"{topic}-{partition}")
        return found

    def append_as_follower(self, target: PartitionLog, records: bytes | memoryview,
                           leader_high_watermark: int, leader_log_start: int) -> None:
        """Append what the leader sent, offsets and epochs as they are; then follow its high
        watermark and log start offset as far as this log reaches."""
        if len(records):
            target.append(records, leader_epoch=UNDEFINED, origin=AppendOrigin.REPLICATION)
        target.update_high_watermark(min(leader_high_watermark, target.log_end_offset))
        if target.log_start_offset < leader_log_start <= target.high_watermark:
            target.delete_records_before(leader_log_start)

    # ---- waiting ---------------------------------------------------------------------------
    async def wait_for_append(self, partitions: Iterable[TopicPartition], timeout_s: float) -> None:
        """Return when any of `partitions` changes (append, high watermark, leadership), or
        after `timeout_s`."""
        await self.waiters.wait(partitions, timeout_s)

    def _wake(self, key: TopicPartition) -> None:
        self.waiters.wake(key)

    def wake_all(self) -> None:
        """Release every parked fetch and produce (shutdown, topic deletion)."""
        self.waiters.wake_all()
