"""The durable side of the quorum's log (Kafka's KafkaMetadataLog): the metadata log directory
`<metadata log dir>/__cluster_metadata-0/` with the log segments (storage's PartitionLog, every
batch appended as REPLICATION so its offsets and leader epoch stay as raft wrote them), the
`quorum-state` file and the snapshot files.

`open` loads what a `RaftReplica` starts from; the other methods carry out raft's log actions.
Like Kafka, the whole log is recovered at every start (the metadata log is small): a torn or
damaged tail is cut by storage as for any partition. What must not be guessed stops the start
(MetadataLogError): a damaged quorum-state, a missing one where the log shows the replica took
part, a log that starts above 0 with no usable snapshot below it. A damaged snapshot is set
aside for an older usable one.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from spark_log.clock import SYSTEM_CLOCK, Clock
from spark_log.metadata.metadata_topic import METADATA_PARTITION, METADATA_TOPIC
from spark_log.raft.election_state import ElectionState
from spark_log.raft.messages import Batch, OffsetAndEpoch
from spark_log.raft.replicated_log import ReplicatedLog
from spark_log.records import CorruptRecordError
from spark_log.storage.append_info import AppendOrigin
from spark_log.storage.errors import KafkaStorageError
from spark_log.storage.filesystem import DEFAULT_FS, FileSystem
from spark_log.storage.log.log_config import LogConfig
from spark_log.storage.log.partition_log import PartitionLog

from . import snapshot_files as snapshots
from .batch_codec import LeaderChanges, decode_batches, encode_batch
from .quorum_errors import MetadataLogError
from .quorum_state_file import read_election_state, write_election_state

log = logging.getLogger(__name__)

DEFAULT_SEGMENT_BYTES = 1 << 30  # metadata.log.segment.bytes
_READ_CHUNK = 1 << 20


@dataclass
class LoadedLog:
    """What a replica starts from: its election state, its log (after the snapshot), and the
    snapshot's bytes (None without a snapshot)."""

    election: ElectionState
    log: ReplicatedLog
    snapshot_data: bytes | None


class MetadataLog:
    """The files of one replica's metadata log.

    Invariants once open: the segments hold exactly the batches of the replica's log from the
    latest snapshot's end offset on (and possibly older ones below it, in a segment not yet
    deleted); every snapshot file kept is whole and no older than the log's first segment;
    `quorum-state` was replaced atomically. After an I/O error storage takes the log offline
    and every later call raises. Not thread-safe: the driver calls it from one thread.
    """

    def __init__(self, log_dir: str | Path, node_id: int, voters: frozenset[int], *,
                 clock: Clock = SYSTEM_CLOCK, fs: FileSystem = DEFAULT_FS,
                 segment_bytes: int = DEFAULT_SEGMENT_BYTES,
                 snapshot_check: snapshots.SnapshotCheck = snapshots.check_record_batches
                 ) -> None:
        self.log_dir = Path(log_dir)
        self.dir = self.log_dir / f"{METADATA_TOPIC}-{METADATA_PARTITION}"
        self.voters, self.clock, self.fs = voters, clock, fs
        self.leader_changes = LeaderChanges(node_id, voters)
        self._config = LogConfig(internal_segment_bytes=segment_bytes, retention_ms=-1,
                                 retention_bytes=-1, file_delete_delay_ms=0)
        self._snapshot_check = snapshot_check
        self._log: PartitionLog | None = None
        self.snapshot_id: OffsetAndEpoch | None = None

    # ---- opening ------------------------------------------------------------------------------
    def open(self) -> LoadedLog:
        """Recover the directory and load it; MetadataLogError when it cannot be trusted."""
        plog = self._log = PartitionLog(
            str(self.log_dir), METADATA_TOPIC, METADATA_PARTITION, self._config,
            clock=self.clock, fs=self.fs, recovery_point=0, had_clean_shutdown=False)
        try:
            return self._load(plog)
        except BaseException:
            self._log = None
            plog.release()
            raise

    def _load(self, plog: PartitionLog) -> LoadedLog:
        snapshots.remove_leftovers(self.dir, self.fs)
        chosen, data = self._usable_snapshot(plog.log_start_offset)
        batches = self._read_batches(plog, plog.log_start_offset, plog.log_end_offset)
        if chosen is not None:
            batches = self._after_snapshot(plog, chosen, batches)
        last_epoch = max(batches[-1].epoch if batches else 0, chosen.epoch if chosen else 0)
        end = batches[-1].next_offset if batches else (chosen.offset if chosen else 0)
        needed = None
        if end > 0 or chosen is not None:
            needed = f"the log holds records up to offset {end} (epoch {last_epoch})"
        election = read_election_state(self.dir, needed, last_epoch)
        try:
            replicated = ReplicatedLog(chosen, batches)
        except ValueError as e:
            raise MetadataLogError(f"{self.dir}: the log does not follow its snapshot "
                                   f"{chosen}: {e}; restore the directory from a backup") from e
        if chosen is not None:
            snapshots.delete_snapshots(
                self.dir, [s for s in snapshots.list_snapshots(self.dir) if s < chosen],
                self.fs)
        self.snapshot_id = chosen
        log.info("Loaded the metadata log %s: snapshot %s, offsets %d to %d, %s", self.dir,
                 chosen, replicated.start_offset, replicated.end_offset, election)
        return LoadedLog(election, replicated, data)

    def _usable_snapshot(self, log_start: int) -> tuple[OffsetAndEpoch | None, bytes | None]:
        """The newest whole snapshot the log follows on from; damaged ones are set aside."""
        skipped = []
        for snapshot_id in reversed(snapshots.list_snapshots(self.dir)):
            if snapshot_id.offset < log_start:
                break
            name = snapshots.snapshot_file_name(snapshot_id)
            data = snapshots.read_snapshot(self.dir, snapshot_id)
            problem = self._snapshot_check(data)
            if problem is None:
                return snapshot_id, data
            aside = snapshots.set_aside(self.dir, snapshot_id, self.fs)
            log.warning("Snapshot %s is damaged (%s); kept as %s, trying an older one",
                        self.dir / name, problem, aside.name)
            skipped.append(f"{name} ({problem})")
        if log_start > 0:
            found = f"the damaged {', '.join(skipped)}" if skipped else "none"
            raise MetadataLogError(
                f"{self.dir}: the log starts at offset {log_start} but no usable snapshot "
                f"covers the records below it (found: {found}); the replica cannot rebuild its "
                f"state, so it does not start. Restore the snapshot from a backup; or, while the "
                f"other voters run and have a leader, remove {self.log_dir} and start this node "
                f"again: it then copies the log from the leader.")
        return None, None

    def _read_batches(self, plog: PartitionLog, start: int, end: int) -> list[Batch]:
        out: list[Batch] = []
        offset = start
        while offset < end:
            data = plog.read(offset, _READ_CHUNK).read_bytes()
            try:
                batches = decode_batches(data)
            except CorruptRecordError as e:
                raise MetadataLogError(f"{self.dir}: a batch from offset {offset} is not a "
                                       f"quorum batch ({e}); restore the directory from a "
                                       f"backup") from e
            if not batches:
                break
            out += batches
            offset = batches[-1].next_offset
        return out

    def _after_snapshot(self, plog: PartitionLog, snapshot_id: OffsetAndEpoch,
                        batches: list[Batch]) -> list[Batch]:
        """The batches after the snapshot. A snapshot past the log's end or of a later epoch
        than its last record was installed from the leader just before a crash that came
        before the log was emptied (Kafka's truncateToLatestSnapshot): empty it now."""
        last_epoch = batches[-1].epoch if batches else 0
        end = batches[-1].next_offset if batches else plog.log_end_offset
        if snapshot_id.offset > end or snapshot_id.epoch > last_epoch:
            if batches or plog.log_end_offset != snapshot_id.offset:
                log.info("%s: snapshot %s is ahead of the log (end %d, epoch %d); starting the "
                         "log empty at its end", self.dir, snapshot_id, end, last_epoch)
                plog.truncate_fully_and_start_at(snapshot_id.offset)
            return []
        return [b for b in batches if b.next_offset > snapshot_id.offset]

    # ---- raft's actions -------------------------------------------------------------------------
    @property
    def _plog(self) -> PartitionLog:
        if self._log is None:
            raise ValueError(f"the metadata log {self.dir} is not open")
        return self._log

    def persist_election(self, state: ElectionState) -> None:
        write_election_state(self.dir, state, self.voters)

    def append(self, batches: Sequence[Batch]) -> None:
        """Append at the log's end, in as few writes as the segment size allows (an append
        must fit in one segment)."""
        now, limit = self.clock.now_ms(), self._config.segment_size
        chunk: list[bytes] = []
        for batch in batches:
            data = encode_batch(batch, now, self.leader_changes)
            if chunk and sum(map(len, chunk)) + len(data) > limit:
                self._write(chunk, batch.epoch)
                chunk = []
            chunk.append(data)
        if chunk:
            self._write(chunk, batches[-1].epoch)

    def _write(self, chunk: list[bytes], epoch: int) -> None:
        self._plog.append(b"".join(chunk), leader_epoch=epoch, origin=AppendOrigin.REPLICATION)

    def truncate(self, offset: int) -> None:
        self._plog.truncate_to(offset)

    def flush(self) -> None:
        self._plog.flush()

    def save_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """Write the snapshot durably, then drop the segments and snapshots below it."""
        snapshots.write_snapshot(self.dir, snapshot_id, data, self.fs)
        plog = self._plog
        plog.update_high_watermark(snapshot_id.offset)
        plog.delete_records_before(snapshot_id.offset)
        plog.flush_due()  # removes the deleted segments' files
        self._forget_snapshots_except(snapshot_id, older_only=True)

    def install_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """Write a snapshot fetched from the leader durably, then start the log empty at its
        end offset."""
        snapshots.write_snapshot(self.dir, snapshot_id, data, self.fs)
        plog = self._plog
        plog.truncate_fully_and_start_at(snapshot_id.offset)
        plog.flush_due()
        self._forget_snapshots_except(snapshot_id, older_only=False)

    def _forget_snapshots_except(self, keep: OffsetAndEpoch, older_only: bool) -> None:
        doomed = [s for s in snapshots.list_snapshots(self.dir)
                  if s != keep and (s < keep or not older_only)]
        snapshots.delete_snapshots(self.dir, doomed, self.fs)
        self.snapshot_id = keep

    # ---- closing --------------------------------------------------------------------------------
    def close(self) -> None:
        """Flush and close the segments. When that fails (a full disk), the files are only
        released: whatever the quorum relied on was flushed when it was appended, and the log
        is recovered at every open, so the error is logged and costs nothing."""
        plog, self._log = self._log, None
        if plog is None:
            return
        try:
            plog.close()
        except KafkaStorageError as exc:
            log.error("The metadata log %s was not closed cleanly (%s); it is recovered at the "
                      "next start", self.dir, exc)
            plog.release()

    def abandon(self) -> None:
        """Let go of the files without flushing anything more (a crash, or after an error)."""
        if self._log is not None:
            self._log.release()
            self._log = None
