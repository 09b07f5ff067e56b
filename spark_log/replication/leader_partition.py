"""A partition as its leader replicates it (Kafka's Partition, leader side): each follower's
progress, the ISR, ISR changes proposed to the controller (AlterPartition) one at a time, and
the high watermark.

Kafka's rules, kept here:
* a follower's fetch at offset F says its log ends at F; it is caught up *now* if F reaches the
  leader's log end, or *as of its previous fetch* if F reaches the leader's log end at that
  previous fetch (`replica.lag.time.max.ms` is measured from the last time it was caught up);
* the high watermark is the smallest log end offset among the leader and the followers of the
  maximal ISR — the committed ISR plus a replica being added (KIP-497: while an expansion is in
  flight the new member already counts, so the high watermark never depends on a change not
  yet committed) — and it never moves back; a follower whose log end is unknown (no fetch
  since this leader's epoch began) holds it where it is;
* a follower outside the ISR joins it once its log reaches the high watermark and the start of
  the leader's epoch; an ISR member not caught up for `replica.lag.time.max.ms` leaves it;
  both are proposals the controller must commit before the ISR here changes (`isr_committed`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

UNKNOWN = -1


@dataclass
class FollowerProgress:
    """What the leader knows of one follower since its epoch began."""

    log_end_offset: int = UNKNOWN
    last_caught_up_ms: int = UNKNOWN
    last_fetch_ms: int = UNKNOWN
    last_fetch_leader_end: int = UNKNOWN  # the leader's log end at that fetch


@dataclass(frozen=True, slots=True)
class IsrChange:
    """An AlterPartition proposal: the ISR the leader wants, at its leader and partition
    epochs (the controller refuses it if either is stale)."""

    isr: tuple[int, ...]
    leader_epoch: int
    partition_epoch: int


@dataclass
class LeaderPartition:
    """Invariants: the leader is in `isr`; `high_watermark` never decreases and never exceeds
    the log end offset of any member of the maximal ISR; at most one ISR change is pending,
    and the committed `isr` changes only through `isr_committed`. Not thread-safe."""

    node_id: int
    leader_epoch: int
    partition_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    log_end_offset: int
    high_watermark: int
    epoch_start_offset: int  # the leader's log end when its epoch began
    started_ms: int  # when it became leader: ISR members count as caught up then
    pending: IsrChange | None = None
    followers: dict[int, FollowerProgress] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.node_id not in self.isr:
            raise ValueError(f"leader {self.node_id} is not in its ISR {self.isr}")
        for replica in self.replicas:
            if replica != self.node_id:
                progress = self.followers.setdefault(replica, FollowerProgress())
                if replica in self.isr and progress.last_caught_up_ms == UNKNOWN:
                    progress.last_caught_up_ms = self.started_ms

    # ---- what the broker asks ---------------------------------------------------------------
    @property
    def maximal_isr(self) -> frozenset[int]:
        """The committed ISR and, while an expansion is pending, its new member."""
        if self.pending is not None:
            return frozenset(self.isr) | frozenset(self.pending.isr)
        return frozenset(self.isr)

    def under_min_isr(self, min_insync_replicas: int) -> bool:
        """acks=all is refused (NOT_ENOUGH_REPLICAS) while the committed ISR is this small."""
        return len(self.isr) < min_insync_replicas

    def acks_all_done(self, next_offset: int, min_insync_replicas: int) -> bool | None:
        """Whether an acks=all append ending before `next_offset` is acknowledged: None while
        the high watermark is below it; True; or False — NOT_ENOUGH_REPLICAS_AFTER_APPEND —
        when it got there with the maximal ISR below min.insync.replicas (the ISR shrank while
        the append waited: fewer replicas have it than the producer asked for)."""
        if self.high_watermark < next_offset:
            return None
        return len(self.maximal_isr) >= min_insync_replicas

    # ---- events -----------------------------------------------------------------------------
    def appended(self, log_end_offset: int) -> bool:
        """The leader's log grew to `log_end_offset`; whether the high watermark moved."""
        if log_end_offset < self.log_end_offset:
            raise ValueError(f"the leader's log end went back from {self.log_end_offset} to "
                             f"{log_end_offset}")
        self.log_end_offset = log_end_offset
        return self._advance_high_watermark()

    def follower_fetched(self, replica: int, fetch_offset: int, now_ms: int) -> bool:
        """A follower fetched from `fetch_offset` (its log ends there); whether the high
        watermark moved."""
        progress = self.followers.get(replica)
        if progress is None:
            raise ValueError(f"{replica} is not a follower of this partition "
                             f"(replicas {self.replicas})")
        if fetch_offset > self.log_end_offset:
            raise ValueError(f"follower {replica} fetches at {fetch_offset}, past the leader's "
                             f"log end {self.log_end_offset}")
        if fetch_offset >= self.log_end_offset:
            progress.last_caught_up_ms = now_ms
        elif progress.last_fetch_leader_end != UNKNOWN and \
                fetch_offset >= progress.last_fetch_leader_end:
            progress.last_caught_up_ms = max(progress.last_caught_up_ms, progress.last_fetch_ms)
        progress.log_end_offset = fetch_offset
        progress.last_fetch_ms = now_ms
        progress.last_fetch_leader_end = self.log_end_offset
        return self._advance_high_watermark()

    def isr_committed(self, isr: tuple[int, ...], partition_epoch: int) -> bool:
        """The controller committed this ISR (the metadata says so); whether the high
        watermark moved (a shrink can let it)."""
        if partition_epoch < self.partition_epoch:
            return False  # older than what this leader already knows
        if self.node_id not in isr:
            raise ValueError(f"the committed ISR {isr} leaves out its leader {self.node_id}")
        self.isr, self.partition_epoch, self.pending = tuple(isr), partition_epoch, None
        for replica in isr:  # a member this leader did not know (a reassignment's): unknown
            if replica != self.node_id:
                self.followers.setdefault(replica, FollowerProgress())
        self._forget_removed()
        return self._advance_high_watermark()

    def set_replicas(self, replicas: tuple[int, ...]) -> None:
        """A reassignment changed the replica set: an added follower starts unknown; a removed
        one is forgotten once no ISR (committed or pending) counts it."""
        self.replicas = replicas
        for replica in replicas:
            if replica != self.node_id:
                self.followers.setdefault(replica, FollowerProgress())
        self._forget_removed()

    def isr_change_failed(self) -> None:
        """The controller refused the pending change at the partition epoch it names: propose
        again later. Not for a request that went unanswered, nor for a refusal because the
        partition epoch moved on (INVALID_UPDATE_VERSION) — the change may have been committed,
        so the maximal ISR must keep counting it until the metadata says (`isr_committed`)."""
        self.pending = None

    # ---- proposals --------------------------------------------------------------------------
    def expansion(self, candidate: int | None = None) -> IsrChange | None:
        """The ISR with every follower that caught up added — or only `candidate`, the one
        that just fetched (as Kafka checks: another's progress may be stale, its broker gone) —
        if any did and no change is pending (the proposal is pending from now on)."""
        if self.pending is not None:
            return None
        joining = [r for r, p in sorted(self.followers.items())
                   if candidate in (None, r)
                   and r not in self.isr and r in self.replicas and p.log_end_offset != UNKNOWN
                   and p.log_end_offset >= self.high_watermark
                   and p.log_end_offset >= self.epoch_start_offset]
        if not joining:
            return None
        return self._propose((*self.isr, *joining))

    def shrink(self, now_ms: int, max_lag_ms: int) -> IsrChange | None:
        """The ISR without the followers that have not caught up for `max_lag_ms`, if any and
        no change is pending (the proposal is pending from now on)."""
        if self.pending is not None:
            return None
        lagging = {r for r in self.isr if r != self.node_id
                   and now_ms - self._caught_up_ms(r) > max_lag_ms}
        if not lagging:
            return None
        return self._propose(tuple(r for r in self.isr if r not in lagging))

    # ---- internals --------------------------------------------------------------------------
    def _caught_up_ms(self, replica: int) -> int:
        return self.followers[replica].last_caught_up_ms

    def _forget_removed(self) -> None:
        counted = set(self.replicas) | self.maximal_isr
        for replica in [r for r in self.followers if r not in counted]:
            del self.followers[replica]

    def _propose(self, isr: tuple[int, ...]) -> IsrChange:
        self.pending = IsrChange(isr, self.leader_epoch, self.partition_epoch)
        return self.pending

    def _advance_high_watermark(self) -> bool:
        new = self.log_end_offset
        if self.followers:  # (every ISR member but the leader is one: a single replica has none)
            ends = [self.followers[r].log_end_offset for r in self.maximal_isr
                    if r != self.node_id]
            if UNKNOWN in ends:
                return False
            new = min([new, *ends])
        if new <= self.high_watermark:
            return False
        self.high_watermark = new
        return True
