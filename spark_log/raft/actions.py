"""What a replica asks its driver to do, in order.

A step of the state machine returns a list of actions. The driver carries them out one after
another, and an action may rely on every earlier one having completed: a vote is sent only
after the election state that records it is on disk, a fetch (whose offset tells the leader
what this voter has made durable) only after the append and flush before it, a high watermark
only after the leader's own flush. A crash between two actions loses the later ones, and the
state machine is rebuilt from what was made durable.
"""

from __future__ import annotations

from dataclasses import dataclass

from .election_state import ElectionState
from .messages import Batch, Message, OffsetAndEpoch


@dataclass(frozen=True)
class Send:
    message: Message


@dataclass(frozen=True)
class PersistElection:
    """Write the election state durably (fsynced) before anything that follows."""

    state: ElectionState


@dataclass(frozen=True)
class AppendBatches:
    """Append batches at the end of the log (not yet durable)."""

    batches: tuple[Batch, ...]


@dataclass(frozen=True)
class TruncateLog:
    """Remove every batch at or after `offset` (a batch boundary)."""

    offset: int


@dataclass(frozen=True)
class FlushLog:
    """fsync the log up to its end."""


@dataclass(frozen=True)
class SaveSnapshot:
    """Store a snapshot of the applied state at `snapshot_id` durably, then drop the log below
    its end offset."""

    snapshot_id: OffsetAndEpoch
    data: bytes


@dataclass(frozen=True)
class InstallSnapshot:
    """A snapshot fetched from the leader: store it durably, replace the whole log by it, and
    load the application's state from it."""

    snapshot_id: OffsetAndEpoch
    data: bytes


@dataclass(frozen=True)
class Commit:
    """Records below `high_watermark` are committed: the application may apply them."""

    high_watermark: int


@dataclass(frozen=True)
class LeaderChange:
    """The replica learnt a new epoch and, when known, its leader (itself when elected)."""

    epoch: int
    leader_id: int


Action = (Send | PersistElection | AppendBatches | TruncateLog | FlushLog | SaveSnapshot |
          InstallSnapshot | Commit | LeaderChange)
