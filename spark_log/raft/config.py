"""The quorum's settings, with Kafka's names and defaults (`controller.quorum.*`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class Random(Protocol):
    """The randomness a replica needs (election jitter), injected: `random.Random` fits."""

    def randrange(self, stop: int) -> int: ...


@dataclass(frozen=True)
class QuorumConfig:
    """Invariant: `voters` is not empty."""

    voters: frozenset[int]
    election_timeout_ms: int = 1000  # controller.quorum.election.timeout.ms
    election_backoff_max_ms: int = 1000  # controller.quorum.election.backoff.max.ms
    fetch_timeout_ms: int = 2000  # controller.quorum.fetch.timeout.ms
    request_timeout_ms: int = 2000  # controller.quorum.request.timeout.ms
    retry_backoff_ms: int = 20  # controller.quorum.retry.backoff.ms
    fetch_max_wait_ms: int = 500  # how long a leader may hold a fetch that finds nothing new
    fetch_max_bytes: int = 8 << 20
    snapshot_chunk_bytes: int = 1 << 20

    def __post_init__(self) -> None:
        if not self.voters:
            raise ValueError("a quorum needs at least one voter")

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    @property
    def check_quorum_timeout_ms(self) -> int:
        """A leader that has not heard from a majority for this long resigns (Kafka: 1.5 x the
        fetch timeout), so a leader cut off from the quorum stops answering as one."""
        return self.fetch_timeout_ms * 3 // 2
