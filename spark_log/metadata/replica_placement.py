"""Where new partitions' replicas go (Kafka's StripedReplicaPlacer), and the checks an explicit
assignment must pass, for CreateTopics and CreatePartitions.

Racks are visited round robin, each partition starting one rack further than the last, and
within a rack brokers round robin too, so replicas and leaders stripe evenly over racks first,
then over brokers. Unfenced brokers are used before fenced ones and only unfenced brokers lead.
Where the round robins start is random: `randrange(n)` returns an int in [0, n), as Java's
`Random.nextInt(n)`, and draws happen in the order Kafka's placer makes them (racks are set up
in rack-name order), so Kafka's test vectors reproduce with a port of its random generator.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from .broker_registration import BrokerRegistration
from .errors import InvalidReplicaAssignmentError, InvalidReplicationFactorError
from .partition_registration import PartitionRegistration

__all__ = [
    "RandRange",
    "UsableBroker",
    "new_partition",
    "place_replicas",
    "usable_brokers",
    "validate_manual_assignment",
]

RandRange = Callable[[int], int]


@dataclass(frozen=True, slots=True)
class UsableBroker:
    """A broker new replicas may go to; a fenced one only holds followers."""

    id: int
    rack: str | None = None
    fenced: bool = False


def usable_brokers(brokers: Mapping[int, BrokerRegistration]) -> list[UsableBroker]:
    """Kafka's usable brokers: registered and not in controlled shutdown, fenced or not."""
    return [UsableBroker(broker.id, broker.rack, broker.fenced)
            for broker in brokers.values() if not broker.in_controlled_shutdown]


def place_replicas(
    brokers: Iterable[UsableBroker],
    partitions: int,
    replication_factor: int,
    randrange: RandRange,
) -> list[tuple[int, ...]]:
    """Replicas for `partitions` new partitions, leader first.

    Raises `InvalidReplicationFactorError` with Kafka's messages for a factor below one, no
    unfenced broker, or fewer usable brokers than the factor.
    """
    racks = _RackList(brokers, randrange)
    _check_replication_factor(replication_factor, racks.unfenced, racks.total)
    return [racks.place(replication_factor) for _ in range(partitions)]


def new_partition(replicas: Sequence[int], brokers: Mapping[int, BrokerRegistration]
                  ) -> PartitionRegistration | None:
    """A new partition on `replicas`, as Kafka registers it: the ISR is the active replicas in
    replica order, the first of them leads, both epochs are 0. None when no replica is active:
    Kafka then refuses the request (INVALID_REPLICATION_FACTOR for placed replicas,
    INVALID_REPLICA_ASSIGNMENT for explicit ones)."""
    isr = tuple(r for r in replicas if (b := brokers.get(r)) is not None and b.is_active)
    if not isr:
        return None
    return PartitionRegistration(replicas=tuple(replicas), isr=isr, leader=isr[0],
                                 leader_epoch=0, partition_epoch=0)


def validate_manual_assignment(
    replicas: Sequence[int],
    registered: Iterable[int],
    replication_factor: int | None = None,
) -> None:
    """Raise `InvalidReplicaAssignmentError`, with Kafka's message, unless `replicas` is a
    non-empty list of distinct registered brokers of `replication_factor` (when given: the
    factor of the topic's other partitions)."""
    if not replicas:
        raise InvalidReplicaAssignmentError(
            "The manual partition assignment includes an empty replica list.")
    known = set(registered)
    previous = None
    for broker_id in sorted(replicas):
        if broker_id not in known:
            raise InvalidReplicaAssignmentError(
                f"The manual partition assignment includes broker {broker_id}, but no such "
                "broker is registered.")
        if broker_id == previous:
            raise InvalidReplicaAssignmentError(
                f"The manual partition assignment includes the broker {broker_id} more than "
                "once.")
        previous = broker_id
    if replication_factor is not None and len(replicas) != replication_factor:
        raise InvalidReplicaAssignmentError(
            f"The manual partition assignment includes a partition with {len(replicas)} "
            f"replica(s), but this is not consistent with previous partitions, which have "
            f"{replication_factor} replica(s).")


def _check_replication_factor(replication_factor: int, unfenced: int, total: int) -> None:
    if replication_factor <= 0:
        raise InvalidReplicationFactorError(
            f"Invalid replication factor {replication_factor}: the replication factor must be "
            "positive.")
    if unfenced == 0:
        raise InvalidReplicationFactorError("All brokers are currently fenced.")
    if replication_factor > total:
        raise InvalidReplicationFactorError(
            f"The target replication factor of {replication_factor} cannot be reached because "
            f"only {total} broker(s) are registered.")


def _shuffle(items: list, randrange: RandRange) -> None:
    """Java's Collections.shuffle over `randrange`."""
    for index in range(len(items) - 1, 0, -1):
        other = randrange(index + 1)
        items[index], items[other] = items[other], items[index]


class _BrokerList:
    """Brokers handed out round robin, each at most once per iteration epoch.

    Invariant: in an epoch, `index` brokers have been handed out, starting at `offset`; a new
    epoch starts one broker further on.
    """

    __slots__ = ("brokers", "epoch", "index", "offset")

    def __init__(self) -> None:
        self.brokers: list[int] = []
        self.index = self.offset = self.epoch = 0

    def initialize(self, randrange: RandRange) -> None:
        if self.brokers:
            self.brokers.sort()
            self.offset = randrange(len(self.brokers))

    def next(self, epoch: int) -> int:
        """The next broker of `epoch`, or -1 when all were handed out."""
        if not self.brokers:
            return -1
        if self.epoch != epoch:
            self.epoch, self.index = epoch, 0
            self.offset = (self.offset + 1) % len(self.brokers)
        if self.index >= len(self.brokers):
            return -1
        broker = self.brokers[(self.index + self.offset) % len(self.brokers)]
        self.index += 1
        return broker


class _Rack:
    __slots__ = ("fenced", "unfenced")

    def __init__(self) -> None:
        self.fenced = _BrokerList()
        self.unfenced = _BrokerList()

    def next(self, epoch: int) -> int:
        """An unfenced broker if any is left this epoch, else a fenced one, else -1."""
        broker = self.unfenced.next(epoch)
        return broker if broker >= 0 else self.fenced.next(epoch)


class _RackList:
    """The racks, in name order (no rack first), visited round robin from `offset`.

    Invariant: `epoch` counts the partitions placed since the last shuffle; after as many
    partitions as there are unfenced brokers, racks and brokers are shuffled so the same
    assignments do not repeat.
    """

    def __init__(self, brokers: Iterable[UsableBroker], randrange: RandRange) -> None:
        self.randrange = randrange
        by_rack: dict[str | None, _Rack] = {}
        self.total = self.unfenced = 0
        for broker in brokers:
            rack = by_rack.setdefault(broker.rack, _Rack())
            (rack.fenced if broker.fenced else rack.unfenced).brokers.append(broker.id)
            self.total += 1
            self.unfenced += not broker.fenced
        self.names = sorted(by_rack, key=lambda name: (name is not None, name or ""))
        self.racks = {name: by_rack[name] for name in self.names}
        for rack in self.racks.values():
            rack.fenced.initialize(randrange)
            rack.unfenced.initialize(randrange)
        self.offset = randrange(len(self.names)) if self.names else 0
        self.epoch = 0

    def place(self, replication_factor: int) -> tuple[int, ...]:
        _check_replication_factor(replication_factor, self.unfenced, self.total)
        if self.epoch == self.unfenced and self.unfenced > 1:
            self._shuffle()
            self.epoch = 0
        if self.offset == len(self.names):
            self.offset = 0
        first_rack, leader = self._leader()
        replicas = [leader]
        rack_index = self.offset
        while len(replicas) < replication_factor:
            if rack_index == first_rack:
                first_rack = -1  # the leader's rack gave its broker already
            else:
                broker = self.racks[self.names[rack_index]].next(self.epoch)
                if broker >= 0:
                    replicas.append(broker)
            rack_index = (rack_index + 1) % len(self.names)
        self.epoch += 1
        self.offset += 1
        return tuple(replicas)

    def _leader(self) -> tuple[int, int]:
        """(rack index, broker): the first unfenced broker from the rack at `offset` on."""
        rack_index = self.offset
        while True:
            broker = self.racks[self.names[rack_index]].unfenced.next(self.epoch)
            if broker >= 0:
                return rack_index, broker
            rack_index = (rack_index + 1) % len(self.names)

    def _shuffle(self) -> None:
        _shuffle(self.names, self.randrange)
        for rack in self.racks.values():  # in name order, whatever the shuffle did to names
            _shuffle(rack.fenced.brokers, self.randrange)
            _shuffle(rack.unfenced.brokers, self.randrange)
