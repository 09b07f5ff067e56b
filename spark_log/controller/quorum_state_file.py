"""The `quorum-state` file of a metadata log directory: the replica's election state (epoch,
leader, vote) as Kafka's FileQuorumStateStore writes it, replaced atomically and fsynced (temp
file, fsync, rename, directory fsync) before anything that depends on it.

What is in it cannot be guessed: a replica that forgot its vote could vote twice in one epoch.
A damaged file, or a missing one where the log shows the replica took part in the quorum,
stops the start with one error naming the file and what to do.
"""

from __future__ import annotations

from pathlib import Path

from spark_log.raft.election_state import ElectionState, ElectionStateError
from spark_log.storage.data_dir.atomic_file import write_atomically

from .quorum_errors import MetadataLogError

QUORUM_STATE_FILE = "quorum-state"

_WHAT_TO_DO = ("Restore it from a backup of this node; or, while the other voters run and have "
               "a leader, remove {dir} and start this node again: it then copies the log from "
               "the leader.")


def write_election_state(directory: Path, state: ElectionState, voters: frozenset[int]) -> None:
    """Replace the quorum-state file durably."""
    write_atomically(directory / QUORUM_STATE_FILE, state.encode(voters))


def read_election_state(directory: Path, needed_because: str | None,
                        least_epoch: int) -> ElectionState:
    """The election state on disk. Without a file, a new replica starts in epoch 0 — unless
    `needed_because` says why this replica must have one. Refuses (MetadataLogError) a file
    that does not decode, or whose epoch is below `least_epoch` (the log's last epoch: the
    file is older than the log)."""
    path = directory / QUORUM_STATE_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        if needed_because is not None:
            raise _refuse(path, f"is missing although {needed_because}") from None
        return ElectionState(0)
    except OSError as e:
        raise _refuse(path, f"cannot be read ({e})") from None
    try:
        state = ElectionState.decode(data)
    except ElectionStateError as e:
        raise _refuse(path, f"is damaged ({e})") from None
    if state.epoch < least_epoch:
        raise _refuse(path, f"is older than the log: it records epoch {state.epoch}, the log "
                            f"holds epoch {least_epoch}")
    return state


def _refuse(path: Path, problem: str) -> MetadataLogError:
    return MetadataLogError(
        f"{path} {problem}; the replica's vote cannot be known and guessing it could cast a "
        f"second vote in one epoch, so it does not start. "
        + _WHAT_TO_DO.format(dir=path.parent))
