"""Where a follower truncates its log when its leader says they diverge (KIP-101, KIP-279 and
KIP-320): from the leader's answer — the end offset of the largest epoch the leader has at or
below the one the follower asked about — and the follower's own leader-epoch entries.

Kafka's rule (its fetcher's getOffsetTruncationState), as a pure function:
* the leader knows no such epoch: truncate to the follower's high watermark;
* the leader answers no epoch but an offset: truncate there;
* the follower has that epoch: truncate to the smaller of the two ends of it — done;
* the follower does not have it: truncate to its end of the largest epoch below, and ask again
  with that epoch (not done: two logs can diverge more than once);
* the follower keeps no epochs, or none at or below: truncate to the leader's offset.
Never past the follower's own log end.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

UNDEFINED = -1


class EpochStart(NamedTuple):
    epoch: int
    start_offset: int


class Truncation(NamedTuple):
    offset: int
    done: bool  # False: truncate there, then ask the leader again


def end_offset_for(entries: Sequence[EpochStart], epoch: int, log_end_offset: int
                   ) -> tuple[int, int]:
    """(largest epoch <= `epoch`, where it ends) in a log whose epochs start at `entries`
    (ascending), as Kafka's endOffsetFor answers: the log end for the latest epoch;
    (UNDEFINED, UNDEFINED) for an epoch above every entry (or none kept); for one below every
    entry, that epoch with the first entry's start."""
    if epoch == UNDEFINED or not entries:
        return UNDEFINED, UNDEFINED
    if epoch == entries[-1].epoch:
        return epoch, log_end_offset
    higher = next((e for e in entries if e.epoch > epoch), None)
    if higher is None:
        return UNDEFINED, UNDEFINED
    floor = [e for e in entries if e.epoch <= epoch]
    return (floor[-1].epoch if floor else epoch), higher.start_offset


def truncation(follower: Sequence[EpochStart], follower_end: int, follower_high_watermark: int,
               leader_epoch: int, leader_end: int) -> Truncation:
    """Where the follower truncates, given the leader's (epoch, end offset) answer."""
    if leader_end == UNDEFINED:
        return Truncation(min(follower_high_watermark, follower_end), True)
    if leader_epoch == UNDEFINED or not follower:
        return Truncation(min(leader_end, follower_end), True)
    epoch, end = end_offset_for(follower, leader_epoch, follower_end)
    if end == UNDEFINED:
        return Truncation(min(leader_end, follower_end), True)
    if epoch != leader_epoch:
        return Truncation(min(end, follower_end), False)
    return Truncation(min(end, leader_end, follower_end), True)
