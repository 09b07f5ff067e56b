"""A deterministic simulator of the controller quorum: real `RaftReplica` state machines, a
simulated network that drops, delays, duplicates and reorders messages and cuts links (and,
like TCP, never hands a restarted process what was sent to its previous one), replicas that
crash and restart with only what they made durable, and a checker of Raft's promises.

Everything random comes from one seed, so a failing seed replays exactly:

    .venv/bin/python -m tests.raft.simulation --seed 1234 --trace     # one seed, with a trace
    .venv/bin/python -m tests.raft.simulation --seeds 0:100000         # the long run

The checker holds, at every step: at most one leader per epoch; a committed record is never
lost or changed (every commit a replica announces agrees with every earlier one, and every leader
of an epoch later than the one a record was committed in holds it — Raft's leader completeness;
a leader of an older epoch whose votes arrive late may lack it, and can commit nothing); every
replica's applied records are a prefix of the committed log; a replica's high watermark never
goes back; a snapshot written lies past the one before it, and one handed back late (as the
node's writer thread does) is refused only when a newer one was installed meanwhile. After the
faults stop, a leader is elected, commits new records, and every replica applies everything
committed (liveness); then a follower killed and restarted in the calm rejoins its leader
without anybody standing for election (no needless failover).
"""

from __future__ import annotations

import heapq
import json
import random
import sys
from collections import Counter
from dataclasses import dataclass, field

from spark_log.raft.actions import (
    Action,
    AppendBatches,
    Commit,
    FlushLog,
    InstallSnapshot,
    LeaderChange,
    PersistElection,
    SaveSnapshot,
    Send,
    TruncateLog,
)
from spark_log.raft.config import QuorumConfig
from spark_log.raft.election_state import ElectionState
from spark_log.raft.messages import Batch, Message, OffsetAndEpoch
from spark_log.raft.replica import RaftReplica
from spark_log.raft.replicated_log import ReplicatedLog
from tests import seeded_runs
from tests.raft.simulation_checker import Checker, Violation


@dataclass
class Disk:
    """What a replica has written: durable part (survives any crash) and page cache (survives
    a process kill, not a power loss)."""

    election: ElectionState = field(default_factory=lambda: ElectionState(0))
    snapshot: tuple[OffsetAndEpoch, bytes] | None = None
    batches: list[Batch] = field(default_factory=list)  # as the file is now
    durable: list[Batch] = field(default_factory=list)  # as of the last flush

    def crash(self, power_loss: bool) -> None:
        if power_loss:
            self.batches = list(self.durable)
        else:
            self.durable = list(self.batches)  # the kernel writes the page cache out later


@dataclass
class App:
    """A replica's application: the committed records it applied, in order."""

    applied: list[tuple[int, bytes]] = field(default_factory=list)  # (offset, record)
    next_offset: int = 0  # the first offset not yet applied
    last_epoch: int = 0  # of the last batch applied
    since_snapshot: int = 0

    def load(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        self.applied = [(o, r.encode("latin-1")) for o, r in json.loads(data)]
        self.next_offset, self.last_epoch = snapshot_id.offset, snapshot_id.epoch
        self.since_snapshot = 0

    def dump(self) -> bytes:
        return json.dumps([(o, r.decode("latin-1")) for o, r in self.applied]).encode()


@dataclass
class Faults:
    drop: float = 0.03
    duplicate: float = 0.02
    slow: float = 0.05  # a message delayed long enough to arrive out of order
    crash_per_s: float = 0.25
    power_loss: float = 0.5  # of crashes: lose the page cache too
    crash_mid_step: float = 0.02  # a crash between two actions of a step
    partition_per_s: float = 0.3
    resign_per_s: float = 0.05
    late_snapshot: float = 0.3  # of snapshots decided: taken up to 1 s later, as the node's
    # writer thread hands one back after encoding it (installs may have come in between)


class Simulation:
    """One seeded run: `voters` + `observers` replicas, faults for `fault_ms`, then a calm
    `heal_ms` in which the quorum must make progress and every replica catch up."""

    def __init__(self, seed: int, voters: int = 3, observers: int = 1, fault_ms: int = 10_000,
                 heal_ms: int = 8_000, propose_every_ms: int = 100, snapshot_every: int = 25,
                 faults: Faults | None = None, trace: bool = False,
                 fetch_max_bytes: int = 8 << 20) -> None:
        self.rng = random.Random(seed)
        self.late = random.Random(seed ^ 0x1A7E)  # its own stream: the other faults keep theirs
        self.seed, self.trace = seed, trace
        self.faults = faults or Faults()
        # A small fetch size sends one batch per response: followers then hold old records
        # without the new leader's epoch-start record, where Raft's commitment rule matters.
        self.config = QuorumConfig(frozenset(range(1, voters + 1)),
                                   fetch_max_bytes=fetch_max_bytes)
        self.nodes = list(range(1, voters + observers + 1))
        self.fault_ms, self.heal_ms = fault_ms, heal_ms
        self.propose_every_ms, self.snapshot_every = propose_every_ms, snapshot_every
        self.now = 0
        self.disks = {n: Disk() for n in self.nodes}
        self.apps: dict[int, App] = {}
        self.replicas: dict[int, RaftReplica] = {}
        self.checker = Checker()
        self.cut: set[tuple[int, int]] = set()
        self._queue: list[tuple[int, int, str, object]] = []
        self._seq = 0
        self.proposed = 0
        self.stats: Counter[str] = Counter()  # actions carried out, crashes
        # Until the calm restart every step schedules a tick of its own, so a replica ticks far
        # more often than the driver's one timer would tick it (harmless to safety, but costly
        # in an idle quorum); from then on each replica has one timer, as the driver does.
        self._timers: dict[int, int] | None = None
        self.starts: Counter[int] = Counter()  # of each node
        for node in self.nodes:
            self._start(node)

    # ---- the event loop -------------------------------------------------------------------
    def _at(self, time: int, kind: str, payload: object = None) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (time, self._seq, kind, payload))

    def run(self) -> None:
        end = self.fault_ms + self.heal_ms
        self._at(self.propose_every_ms, "propose")
        self._at(100, "fault")
        self._at(self.fault_ms, "heal")
        for node in self.nodes:
            self._at(0, "tick", (node, self.replicas[node]))
        self._run_until(end)
        self._check_liveness()
        self._check_calm_restart()

    def _run_until(self, end: int) -> None:
        while self._queue and self._queue[0][0] <= end:
            self.now, _, kind, payload = heapq.heappop(self._queue)
            getattr(self, f"_on_{kind}")(payload)

    def _on_tick(self, payload: object) -> None:
        node, replica = payload  # type: ignore[misc]
        if self.replicas.get(node) is not replica:
            return  # a tick of an instance that crashed since
        if self._timers is not None:
            if self._timers.get(node) != self.now:
                return  # superseded by an earlier one
            del self._timers[node]
        self._carry_out(node, replica.tick(self.now))

    def _on_deliver(self, payload: object) -> None:
        """Deliver to the instance the message was sent to: as over a TCP connection, a message
        to a replica that restarted since is lost (its correlation ids start again, so a late
        answer to its previous instance must never reach the new one)."""
        message, addressee = payload  # type: ignore[misc]
        replica = self.replicas.get(message.destination)
        if replica is not None and replica is addressee:
            self._carry_out(message.destination, replica.receive(message, self.now))

    def _on_propose(self, _: object) -> None:
        if self.now > self.fault_ms + self.heal_ms:
            return  # the calm restart after the liveness check: an idle quorum
        leaders = [(n, r) for n, r in self.replicas.items() if r.is_leader]
        for node, replica in leaders[:1]:
            self.proposed += 1
            _, actions = replica.propose([f"r{self.proposed}@{self.now}".encode()], self.now)
            self._carry_out(node, actions)
        self._at(self.now + self.propose_every_ms, "propose")

    def _schedule_tick(self, node: int) -> None:
        replica = self.replicas.get(node)
        if replica is None:
            return
        at = max(self.now + 1, replica.next_deadline())
        if self._timers is not None:  # one timer a replica, as the driver has
            if self.now < self._timers.get(node, -1) <= at:
                return
            self._timers[node] = at
        self._at(at, "tick", (node, replica))

    # ---- carrying out actions -------------------------------------------------------------
    def _carry_out(self, node: int, actions: list[Action]) -> None:
        replica = self.replicas[node]
        crash_after = len(actions) + 1
        if self.now < self.fault_ms and actions and \
                self.rng.random() < self.faults.crash_mid_step:
            crash_after = self.rng.randrange(len(actions))
        for i, action in enumerate(actions):
            if i == crash_after:
                self._crash(node, power_loss=self.rng.random() < self.faults.power_loss)
                return
            self._do(node, replica, action)
        self._schedule_tick(node)

    def _do(self, node: int, replica: RaftReplica, action: Action) -> None:
        disk, app = self.disks[node], self.apps[node]
        self.stats[type(action).__name__] += 1
        if self.trace:
            print(f"{self.now:>7} n{node} {action}")
        if isinstance(action, Send):
            self._send(action.message)
        elif isinstance(action, PersistElection):
            disk.election = action.state
        elif isinstance(action, AppendBatches):
            disk.batches.extend(action.batches)
        elif isinstance(action, TruncateLog):
            disk.batches = [b for b in disk.batches if b.next_offset <= action.offset]
        elif isinstance(action, FlushLog):
            disk.durable = list(disk.batches)
        elif isinstance(action, SaveSnapshot):
            self._check_snapshot_moves_on(node, action.snapshot_id)
            disk.snapshot = (action.snapshot_id, action.data)
            for kept in ("batches", "durable"):
                setattr(disk, kept, [b for b in getattr(disk, kept)
                                     if b.base_offset >= action.snapshot_id.offset])
        elif isinstance(action, InstallSnapshot):
            self._check_snapshot_moves_on(node, action.snapshot_id)
            disk.snapshot = (action.snapshot_id, action.data)
            disk.batches, disk.durable = [], []
            app.load(action.snapshot_id, action.data)
            self.checker.applied(node, app.applied)
        elif isinstance(action, Commit):
            self.checker.committed_to(node, action.high_watermark, replica)
            self._apply(node, replica, app, action.high_watermark)
        elif isinstance(action, LeaderChange) and action.leader_id == node:
            self.checker.leader_elected(node, action.epoch, replica)

    def _check_snapshot_moves_on(self, node: int, snapshot_id: OffsetAndEpoch) -> None:
        """A snapshot written (taken or installed) lies past the one on disk: the log start
        never moves back."""
        kept = self.disks[node].snapshot
        if kept is not None and snapshot_id.offset <= kept[0].offset:
            raise Violation(f"replica {node} wrote snapshot {snapshot_id} over {kept[0]}")

    def _apply(self, node: int, replica: RaftReplica, app: App, high_watermark: int) -> None:
        # Up to the Commit action's high watermark: one step can raise it twice (Commit(29),
        # Commit(32)), and while the first is carried out the replica already says 32.
        for batch in replica.committed(app.next_offset):
            if batch.next_offset > high_watermark:
                break
            if not batch.control:
                app.applied += [(batch.base_offset + i, r) for i, r in enumerate(batch.records)]
            app.next_offset, app.last_epoch = batch.next_offset, batch.epoch
            app.since_snapshot += len(batch.records)
        self.checker.applied(node, app.applied)
        if app.since_snapshot >= self.snapshot_every and \
                app.next_offset > replica.log.start_offset:
            app.since_snapshot = 0
            taken = (node, replica, OffsetAndEpoch(app.next_offset, app.last_epoch), app.dump())
            if self.late.random() < self.faults.late_snapshot:
                self._at(self.now + self.late.randrange(1, 1000), "take", taken)
            else:
                self._on_take(taken)

    def _on_take(self, payload: object) -> None:
        """Hand a snapshot decided earlier to the replica, as the snapshot generator does: a
        take that a snapshot installed meanwhile made stale is refused (ValueError) and
        dropped; none may move the log start back."""
        node, replica, snapshot_id, data = payload  # type: ignore[misc]
        if self.replicas.get(node) is not replica:
            return  # decided by an instance that crashed since
        start = replica.log.start_offset
        try:
            actions = replica.take_snapshot(snapshot_id, data)
        except ValueError:
            if snapshot_id.offset > start:
                raise Violation(f"replica {node} refused snapshot {snapshot_id} above its log "
                                f"start {start}") from None
            self.stats["stale snapshot dropped"] += 1
            return
        for action in actions:
            self._do(node, replica, action)

    def _send(self, message: Message) -> None:
        link = (message.source, message.destination)
        faulty = self.now < self.fault_ms
        if link in self.cut or (faulty and self.rng.random() < self.faults.drop):
            return
        copies = 2 if faulty and self.rng.random() < self.faults.duplicate else 1
        addressee = self.replicas.get(message.destination)
        for _ in range(copies):
            slow = faulty and self.rng.random() < self.faults.slow
            delay = self.rng.randrange(50, 600) if slow else self.rng.randrange(1, 10)
            self._at(self.now + delay, "deliver", (message, addressee))

    # ---- crashes, restarts and other faults -----------------------------------------------
    def _start(self, node: int) -> None:
        disk = self.disks[node]
        snapshot_id, data = disk.snapshot if disk.snapshot else (None, None)
        log = ReplicatedLog(snapshot_id, list(disk.batches))
        # A restarted process talks over new connections, so an answer to its previous
        # instance never completes one of its requests: its correlation ids start afresh.
        self.starts[node] += 1
        replica = RaftReplica(node, self.config, disk.election, log, data, self.now,
                              random.Random(self.rng.randrange(1 << 30)),
                              correlation_ids_after=self.starts[node] << 32)
        self.replicas[node] = replica
        app = self.apps[node] = App()
        if snapshot_id is not None and data is not None:
            app.load(snapshot_id, data)
        self.checker.restarted(node)
        self._schedule_tick(node)

    def _crash(self, node: int, power_loss: bool, down_ms: tuple[int, int] = (200, 3000)
               ) -> None:
        if self.trace:
            print(f"{self.now:>7} n{node} CRASH power_loss={power_loss}")
        del self.replicas[node]
        if self._timers is not None:
            self._timers.pop(node, None)
        self.disks[node].crash(power_loss)
        self.stats["power loss" if power_loss else "crash"] += 1
        self._at(self.now + self.rng.randrange(*down_ms), "restart", node)

    def _on_restart(self, node: object) -> None:
        assert isinstance(node, int)
        if node not in self.replicas:
            self._start(node)

    def _on_fault(self, _: object) -> None:
        if self.now >= self.fault_ms:
            return
        step_s = 0.1
        rng, f = self.rng, self.faults
        up = sorted(self.replicas)
        if up and rng.random() < f.crash_per_s * step_s:
            self._crash(rng.choice(up), power_loss=rng.random() < f.power_loss)
        if rng.random() < f.partition_per_s * step_s:
            self._partition()
        leaders = [n for n in up if n in self.replicas and self.replicas[n].is_leader]
        if leaders and rng.random() < f.resign_per_s * step_s:
            node = leaders[0]
            self._carry_out(node, self.replicas[node].resign(self.now))
            if node in self.replicas:
                self._crash(node, power_loss=False)
        self._at(self.now + int(step_s * 1000), "fault")

    def _partition(self) -> None:
        if len(self.nodes) < 2:
            return
        a, b = self.rng.sample(self.nodes, 2)
        if self.rng.random() < 0.3:  # isolate a replica entirely
            links = {(a, n) for n in self.nodes} | {(n, a) for n in self.nodes}
        else:
            links = {(a, b), (b, a)} if self.rng.random() < 0.7 else {(a, b)}
        self.cut |= links
        self._at(self.now + self.rng.randrange(300, 3000), "heal_links", frozenset(links))

    def _on_heal_links(self, links: object) -> None:
        assert isinstance(links, frozenset)
        self.cut -= links

    def _on_heal(self, _: object) -> None:
        self.cut.clear()
        for node in self.nodes:
            if node not in self.replicas:
                self._start(node)

    # ---- liveness -------------------------------------------------------------------------
    def _check_liveness(self) -> None:
        leaders = [n for n, r in self.replicas.items() if r.is_leader]
        if len(leaders) != 1:
            raise Violation(f"{len(leaders)} leaders {self.heal_ms} ms after the faults stopped")
        committed_end = len(self.checker.committed)
        healed_commits = [r for _, _, r, control in self.checker.committed
                          if not control and int(r.split(b"@")[1]) >= self.fault_ms]
        if not healed_commits:
            raise Violation("nothing proposed after the faults stopped was committed")
        for node, app in self.apps.items():
            replica = self.replicas[node]
            if replica.high_watermark < committed_end - 10:
                raise Violation(f"replica {node} did not catch up: high watermark "
                                f"{replica.high_watermark}, committed {committed_end}")
            self.checker.applied(node, app.applied)

    def _check_calm_restart(self) -> None:
        """A follower killed and restarted while its leader is healthy, the network calm and
        nothing proposed rejoins that leader: nobody stands for election, so the epoch stays (a
        restart must not cost a failover). Watched for two fetch timeouts after it is back."""
        leader = next(n for n, r in self.replicas.items() if r.is_leader)
        epoch = self.replicas[leader].epoch
        followers = sorted(self.config.voters - {leader})
        if not followers:
            return
        node = self.rng.choice(followers)
        self._queue = [event for event in self._queue if event[2] != "tick"]
        heapq.heapify(self._queue)
        self._timers = {}
        for each in self.replicas:
            self._schedule_tick(each)
        if self.trace:
            print(f"{self.now:>7} calm restart of n{node} (leader n{leader}, epoch {epoch})")
        self._crash(node, power_loss=False, down_ms=(100, 500))
        self.stats["calm restart"] += 1
        self._run_until(self.now + 500 + 2 * self.config.fetch_timeout_ms)
        changed = {n: (r.epoch, r.leader_id) for n, r in self.replicas.items()
                   if (r.epoch, r.leader_id) != (epoch, leader)}
        if changed:
            raise Violation(f"restarting follower {node} in a calm quorum (leader {leader}, "
                            f"epoch {epoch}) changed the leadership: {changed}")


def run_seed(seed: int, trace: bool = False) -> Simulation:
    """The run for `seed`: its size and faults are drawn from the seed too."""
    shape = random.Random(seed ^ 0x5EED)
    voters = shape.choice([1, 3, 3, 3, 5])
    sim = Simulation(seed, voters=voters, observers=shape.choice([0, 1, 2]), trace=trace,
                     fetch_max_bytes=shape.choice([1, 8 << 20]))
    sim.run()
    return sim


def main(argv: list[str] | None = None) -> int:
    return seeded_runs.main(run_seed, __doc__ or "", argv)


if __name__ == "__main__":
    sys.exit(main())
