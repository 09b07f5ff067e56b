"""A deterministic simulator of one partition replicated over three brokers: the real leader
state machine (`LeaderPartition`: follower progress, ISR changes, high watermark) and the real
truncation rule (`truncation`), brokers that crash and restart, a network that drops, delays
and reorders messages and cuts links, and a controller that commits ISR changes, fences brokers
that stop heartbeating and elects leaders from the ISR — with a checker of the replication
promises.

Everything random comes from one seed, so a failing seed replays exactly:

    .venv/bin/python -m tests.replication.simulation --seed 1234 --trace
    .venv/bin/python -m tests.replication.simulation --seeds 0:100000      # the long run

Checked at every step: a record a producer got an acks=all answer for is in every later
leader's log at its offset, and so is everything below any high watermark a leader reached; a
leader's high watermark never moves back; below its own high watermark every replica's log is
the committed history (no replica diverges below it). After the faults stop: a leader is
elected, new records are acknowledged, and every replica ends with the same log.

The controller is modelled as one reliable, synchronous party (the metadata quorum has its own
simulator); brokers learn its decisions late or out of order, keep the newest, and a restarted
broker acts on nothing older than what the controller had when it registered again. A crash
loses a broker's memory but not its log (the page cache survives a process crash; losing it on
every in-sync replica at once is outside Kafka's promise too).
"""

from __future__ import annotations

import heapq
import random
import sys
from collections import Counter
from dataclasses import dataclass, field

from spark_log.replication.leader_partition import IsrChange, LeaderPartition
from spark_log.replication.truncation import (
    UNDEFINED,
    EpochStart,
    end_offset_for,
    truncation,
)
from tests import seeded_runs

BROKERS = (1, 2, 3)
MIN_ISR = 2
LAG_MS = 1_000  # replica.lag.time.max.ms
SESSION_MS = 900  # broker.session.timeout.ms
HEARTBEAT_MS = 200
FETCH_MS = 50  # a follower's fetch interval when it has caught up



class Violation(AssertionError):
    """A promise of replication was broken."""


def _last_epoch(log: list[tuple[int, str]]) -> int:
    return log[-1][0] if log else UNDEFINED


def epochs_of(log: list[tuple[int, str]]) -> list[EpochStart]:
    found: list[EpochStart] = []
    for offset, (epoch, _) in enumerate(log):
        if not found or epoch > found[-1].epoch:
            found.append(EpochStart(epoch, offset))
    return found


@dataclass
class PartitionState:
    """The controller's committed view of the partition (what the metadata says)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int


@dataclass
class Broker:
    node_id: int
    log: list[tuple[int, str]] = field(default_factory=list)  # (leader epoch, value)
    alive: bool = True
    known: PartitionState | None = None  # the metadata this broker has applied
    leader: LeaderPartition | None = None
    high_watermark: int = 0  # as a follower knows it
    fetching: bool = False
    acks: list[tuple[int, str]] = field(default_factory=list)  # (offset, value) to answer
    # A restarted broker acts on no metadata older than the controller's when it registered
    # (a KRaft broker stays fenced until it has caught up with the metadata log).
    caught_up_from: int = 0


@dataclass(order=True)
class Event:
    time: int
    seq: int
    kind: str = field(compare=False)
    payload: tuple = field(compare=False, default=())  # type: ignore[type-arg]


class Simulation:
    def __init__(self, seed: int, fault_ms: int = 8_000, heal_ms: int = 6_000,
                 trace: bool = False) -> None:
        self.rng = random.Random(seed)
        self.trace = trace
        self.fault_ms, self.heal_ms = fault_ms, heal_ms
        self.now = 0
        self.queue: list[Event] = []
        self.seq = 0
        self.brokers = {b: Broker(b) for b in BROKERS}
        self.state = PartitionState(1, 0, BROKERS, 0)
        self.heartbeats = {b: 0 for b in BROKERS}
        self.fenced: set[int] = set()
        self.cut: set[frozenset[int]] = set()
        self.acked: dict[int, str] = {}  # offset -> value, acknowledged to the producer
        self.committed: list[tuple[int, str]] = []  # below the highest high watermark seen
        self.produced = 0
        self.produced_at_heal = 0
        self.stats: Counter[str] = Counter()

    # ---- the event loop -------------------------------------------------------------------
    def at(self, delay: int, kind: str, *payload: object) -> None:
        self.seq += 1
        heapq.heappush(self.queue, Event(self.now + delay, self.seq, kind, payload))

    def run(self) -> Simulation:
        for b in BROKERS:
            self._publish(b)
            self.at(50, "metadata_poll", b)
            self.at(1, "heartbeat", b)
            self.at(5, "fetch", b)
            self.at(10, "check_isr", b)
        self.at(20, "produce")
        self.at(300, "fault")
        self.at(100, "controller_tick")
        end = self.fault_ms + self.heal_ms
        while self.queue and self.queue[0].time <= end:
            event = heapq.heappop(self.queue)
            self.now = event.time
            getattr(self, f"_on_{event.kind}")(*event.payload)
            self._check()
        self._check_liveness()
        return self

    def log(self, text: str) -> None:
        if self.trace:
            print(f"{self.now:>6} {text}")

    @property
    def faulty(self) -> bool:
        return self.now < self.fault_ms

    # ---- the network ------------------------------------------------------------------------
    def send(self, src: int, dst: int, kind: str, *payload: object) -> None:
        """A message between brokers (0: the controller); dropped, delayed or reordered while
        the faults last, never across a cut link."""
        if frozenset((src, dst)) in self.cut or (self.faulty and self.rng.random() < 0.03):
            return
        slow = self.faulty and self.rng.random() < 0.05
        self.at(self.rng.randrange(30, 400) if slow else self.rng.randrange(1, 8), kind,
                *payload)

    # ---- the controller ---------------------------------------------------------------------
    def _publish(self, broker: int) -> None:
        """The metadata reaches `broker` — maybe late, maybe out of order (the broker keeps the
        newest partition epoch it saw), maybe not at all: brokers also poll for it, as they
        fetch the metadata log, so they always learn the latest state in the end."""
        snapshot = PartitionState(**vars(self.state))
        self.send(0, broker, "metadata", broker, snapshot)

    def _on_metadata_poll(self, broker: int) -> None:
        if self.brokers[broker].alive:
            self.send(broker, 0, "metadata_request", broker)
        self.at(100, "metadata_poll", broker)

    def _on_metadata_request(self, broker: int) -> None:
        self._publish(broker)

    def _commit(self, state: PartitionState, why: str) -> None:
        self.state = state
        self.log(f"controller: {why} -> {state}")
        for b in BROKERS:
            self._publish(b)

    def _on_heartbeat(self, broker: int) -> None:
        if self.brokers[broker].alive:
            self.send(broker, 0, "heartbeat_arrives", broker)
            self.at(HEARTBEAT_MS, "heartbeat", broker)

    def _on_heartbeat_arrives(self, broker: int) -> None:
        self.heartbeats[broker] = self.now
        if broker in self.fenced:
            self.fenced.discard(broker)
            s = self.state
            if s.leader == -1 and broker in s.isr:
                self._commit(PartitionState(broker, s.leader_epoch + 1, s.isr,
                                            s.partition_epoch + 1), f"unfence {broker}, lead")
        self._expire_sessions()

    def _expire_sessions(self) -> None:
        for b in BROKERS:
            if b not in self.fenced and self.now - self.heartbeats[b] > SESSION_MS:
                self._fence(b, "session expired")

    def _fence(self, broker: int, why: str) -> None:
        """The broker leaves the ISR (unless it is the last member) and its leadership goes
        to another ISR member, or to nobody."""
        self.fenced.add(broker)
        s = self.state
        isr = tuple(r for r in s.isr if r != broker) or s.isr
        leader = s.leader
        if leader == broker:
            leader = next((r for r in isr if r != broker and r not in self.fenced), -1)
        self._commit(PartitionState(leader, s.leader_epoch + (leader != s.leader), isr,
                                    s.partition_epoch + 1), f"fence {broker}: {why}")

    def _on_alter_partition(self, broker: int, change: IsrChange) -> None:
        s = self.state
        ok = (broker == s.leader and change.leader_epoch == s.leader_epoch and
              change.partition_epoch == s.partition_epoch and broker in change.isr and
              not any(r in self.fenced for r in change.isr if r not in s.isr))
        if ok:
            self.stats["isr shrinks" if len(change.isr) < len(s.isr) else "isr expansions"] += 1
            self._commit(PartitionState(s.leader, s.leader_epoch, change.isr,
                                        s.partition_epoch + 1), f"AlterPartition from {broker}")
        # A refusal at the partition epoch the leader named settles it; a stale one does not
        # (the change, or another, was committed since: the leader waits for the metadata).
        refused = not ok and change.partition_epoch == s.partition_epoch
        self.send(0, broker, "alter_partition_answer", broker, not refused, change)

    # ---- brokers ------------------------------------------------------------------------------
    def _on_metadata(self, broker_id: int, state: PartitionState) -> None:
        b = self.brokers[broker_id]
        if not b.alive or state.partition_epoch < b.caught_up_from or \
                (b.known is not None and state.partition_epoch <= b.known.partition_epoch):
            return
        was_leader = b.leader is not None and b.known is not None and \
            b.known.leader_epoch == state.leader_epoch
        b.known = state
        if state.leader == broker_id:
            if was_leader:
                assert b.leader is not None
                b.leader.isr_committed(state.isr, state.partition_epoch)
                self._advance(b)
            else:
                self._become_leader(b)
        else:
            b.leader, b.acks = None, []

    def _become_leader(self, b: Broker) -> None:
        s = b.known
        assert s is not None
        for offset, value in self.acked.items():
            if offset >= len(b.log) or b.log[offset][1] != value:
                raise Violation(f"new leader {b.node_id} (epoch {s.leader_epoch}) lacks "
                                f"acknowledged offset {offset} ({value})")
        for offset, entry in enumerate(self.committed):
            if offset >= len(b.log) or b.log[offset] != entry:
                raise Violation(f"new leader {b.node_id} lacks committed offset {offset}")
        b.leader = LeaderPartition(b.node_id, s.leader_epoch, s.partition_epoch, BROKERS, s.isr,
                                   len(b.log), min(b.high_watermark, len(b.log)), len(b.log),
                                   self.now)
        self.stats["elections"] += 1
        self.log(f"b{b.node_id} leads epoch {s.leader_epoch} with log {len(b.log)}")

    def _on_produce(self) -> None:
        if self.now < self.fault_ms + self.heal_ms - 1_000:
            self.at(self.rng.randrange(20, 60), "produce")
        s = self.state
        if s.leader < 0:
            return
        self.produced += 1
        value = f"v{self.produced}"
        self.send(-1, s.leader, "append", s.leader, value)

    def _on_append(self, broker_id: int, value: str) -> None:
        b = self.brokers[broker_id]
        if not b.alive or b.leader is None or b.known is None:
            return
        if b.leader.under_min_isr(MIN_ISR):
            self.stats["not_enough_replicas"] += 1
            return
        b.log.append((b.known.leader_epoch, value))
        b.acks.append((len(b.log) - 1, value))
        b.leader.appended(len(b.log))
        self._advance(b)

    def _advance(self, b: Broker) -> None:
        """The leader's high watermark reached its followers: answer the acks below it."""
        assert b.leader is not None
        hw = b.leader.high_watermark
        if hw > len(self.committed):
            self.committed.extend(b.log[len(self.committed):hw])
        done = [(o, v) for o, v in b.acks if b.leader.acks_all_done(o + 1, MIN_ISR) is not None]
        b.acks = [(o, v) for o, v in b.acks if o >= hw]
        if done and not b.leader.acks_all_done(done[-1][0] + 1, MIN_ISR):
            self.stats["not_enough_replicas_after_append"] += len(done)
            return  # answered NOT_ENOUGH_REPLICAS_AFTER_APPEND: not acknowledged
        for offset, value in done:
            if offset in self.acked and self.acked[offset] != value:
                raise Violation(f"offset {offset} acknowledged as {self.acked[offset]} and "
                                f"as {value}")
            self.acked[offset] = value

    def _on_fetch(self, broker_id: int) -> None:
        b = self.brokers[broker_id]
        if not b.alive:
            return
        s = b.known
        if s is not None and s.leader not in (-1, broker_id) and not b.fetching:
            b.fetching = True
            self.send(broker_id, s.leader, "fetch_arrives", s.leader, broker_id,
                      s.leader_epoch, len(b.log), _last_epoch(b.log))
            self.at(500, "fetch_timeout", broker_id, self.now)
        self.at(FETCH_MS, "fetch", broker_id)

    def _on_fetch_timeout(self, broker_id: int, sent: int) -> None:
        self.brokers[broker_id].fetching = False

    def _on_fetch_arrives(self, leader_id: int, follower: int, epoch: int, offset: int,
                          last_epoch: int) -> None:
        b = self.brokers[leader_id]
        if not b.alive or b.leader is None or b.known is None or \
                b.known.leader_epoch != epoch:
            self.send(leader_id, follower, "fetch_answer", follower, epoch, "error", ())
            return
        epochs = epochs_of(b.log)  # and its own epoch, from where it began (Kafka assigns it
        if not epochs or epochs[-1].epoch < epoch:  # in the cache on becoming leader)
            epochs.append(EpochStart(epoch, b.leader.epoch_start_offset))
        if offset > 0:
            end_epoch, end = end_offset_for(epochs, last_epoch, len(b.log))
            if end_epoch != last_epoch or end < offset:  # KIP-320: the follower diverged
                self.send(leader_id, follower, "fetch_answer", follower, epoch, "diverging",
                          ((offset, last_epoch), end_epoch, end))
                return
        b.leader.follower_fetched(follower, offset, self.now)
        self._advance(b)
        self._propose(b, b.leader.expansion())
        records = tuple(b.log[offset:offset + self.rng.randrange(1, 6)])
        self.send(leader_id, follower, "fetch_answer", follower, epoch, "records",
                  ((offset, last_epoch), records, b.leader.high_watermark))

    def _on_fetch_answer(self, broker_id: int, epoch: int, kind: str, body: tuple) -> None:  # type: ignore[type-arg]
        b = self.brokers[broker_id]
        b.fetching = False
        if not b.alive or b.known is None or b.known.leader_epoch != epoch or \
                b.leader is not None:
            return
        if kind in ("diverging", "records") and body[0] != (len(b.log), _last_epoch(b.log)):
            return  # an answer to an older fetch (reordered, or retried): its log is gone
        if kind == "diverging":
            _, leader_epoch, leader_end = body
            cut = truncation(epochs_of(b.log), len(b.log), b.high_watermark, leader_epoch,
                             leader_end)
            if cut.offset < b.high_watermark:
                raise Violation(f"b{broker_id} truncates to {cut.offset}, below its high "
                                f"watermark {b.high_watermark}")
            self.log(f"b{broker_id} truncates {len(b.log)} -> {cut.offset}")
            self.stats["truncations"] += 1
            del b.log[cut.offset:]
            b.high_watermark = min(b.high_watermark, len(b.log))
        elif kind == "records":
            _, records, hw = body
            b.log.extend(records)
            b.high_watermark = max(b.high_watermark, min(hw, len(b.log)))

    def _on_check_isr(self, broker_id: int) -> None:
        b = self.brokers[broker_id]
        if b.alive and b.leader is not None:
            self._propose(b, b.leader.shrink(self.now, LAG_MS))
        self.at(LAG_MS // 4, "check_isr", broker_id)

    def _propose(self, b: Broker, change: IsrChange | None) -> None:
        """Send an ISR change to the controller, and the same change again while no answer
        comes (Kafka's AlterPartition manager retries it): an unanswered change may have been
        committed, so it stays pending until an answer or the metadata settles it."""
        if change is not None:
            self.send(b.node_id, 0, "alter_partition", b.node_id, change)
            self.at(1_000, "alter_partition_retry", b.node_id, change)

    def _on_alter_partition_retry(self, broker_id: int, change: IsrChange) -> None:
        b = self.brokers[broker_id]
        if b.alive and b.leader is not None and b.leader.pending == change:
            self._propose(b, change)

    def _on_alter_partition_answer(self, broker_id: int, settled: bool,
                                   change: IsrChange) -> None:
        b = self.brokers[broker_id]
        if b.alive and b.leader is not None and not settled and b.leader.pending == change:
            b.leader.isr_change_failed()  # refused at its own partition epoch: not committed

    # ---- faults -------------------------------------------------------------------------------
    def _on_controller_tick(self) -> None:
        self._expire_sessions()
        self.at(100, "controller_tick")

    def _on_fault(self) -> None:
        if not self.faulty:
            self.produced_at_heal = self.produced
            for b in BROKERS:
                if not self.brokers[b].alive:
                    self._restart(b)
            self.cut.clear()
            return
        rng = self.rng
        alive = [b for b in BROKERS if self.brokers[b].alive]
        if rng.random() < 0.12 and len(alive) > 1:
            victim = rng.choice(alive)
            self.brokers[victim] = Broker(victim, log=self.brokers[victim].log, alive=False,
                                          high_watermark=self.brokers[victim].high_watermark)
            self.stats["crashes"] += 1
            self.log(f"b{victim} CRASH")
            self.at(rng.randrange(300, 2500), "restart", victim)
        if rng.random() < 0.08:
            a, c = rng.sample([0, *BROKERS], 2)
            self.cut.add(frozenset((a, c)))
            self.log(f"cut {a}-{c}")
            self.at(rng.randrange(300, 2000), "heal", a, c)
        self.at(100, "fault")

    def _on_restart(self, broker_id: int) -> None:
        if not self.brokers[broker_id].alive:
            self._restart(broker_id)

    def _restart(self, broker_id: int) -> None:
        old = self.brokers[broker_id]
        self.brokers[broker_id] = Broker(broker_id, log=old.log, high_watermark=0)
        if broker_id not in self.fenced:  # a new incarnation registers: the old one is fenced
            self._fence(broker_id, "registered again")
        self.brokers[broker_id].caught_up_from = self.state.partition_epoch
        self.log(f"b{broker_id} restarts with log {len(old.log)}")
        self._publish(broker_id)
        self.at(1, "heartbeat", broker_id)
        self.at(5, "fetch", broker_id)
        self.at(10, "check_isr", broker_id)

    def _on_heal(self, a: int, c: int) -> None:
        self.cut.discard(frozenset((a, c)))

    # ---- the checker --------------------------------------------------------------------------
    def _check(self) -> None:
        """Below its own high watermark every replica holds the committed history (above it, a
        replica may hold records of a leader that lost its epoch, until it truncates)."""
        for b in self.brokers.values():
            hw = b.leader.high_watermark if b.leader is not None else b.high_watermark
            if hw > len(self.committed):
                raise Violation(f"b{b.node_id}'s high watermark {hw} is past the committed "
                                f"{len(self.committed)}")
            if b.log[:hw] != self.committed[:hw]:
                raise Violation(f"b{b.node_id}'s log disagrees with the committed history "
                                f"below its high watermark {hw}")

    def _check_liveness(self) -> None:
        leaders = [b for b in self.brokers.values() if b.leader is not None]
        if len(leaders) != 1:
            raise Violation(f"{len(leaders)} leaders after the faults stopped")
        late = [o for o, v in self.acked.items() if int(v[1:]) > self.produced_at_heal]
        if not late:
            raise Violation("nothing produced after the faults stopped was acknowledged")
        logs = {tuple(b.log[:len(self.committed)]) for b in self.brokers.values()}
        if len(logs) != 1:
            raise Violation("the replicas did not converge on the committed log")


def run_seed(seed: int, trace: bool = False) -> Simulation:
    return Simulation(seed, trace=trace).run()


def main(argv: list[str] | None = None) -> int:
    return seeded_runs.main(run_seed, __doc__ or "", argv)


if __name__ == "__main__":
    sys.exit(main())
