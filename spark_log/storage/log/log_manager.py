"""The logs of one data directory and its checkpoint files (Kafka's LogManager).

Layout of a data directory::

    <data dir>/
        orders-0/ orders-1/ ...              one directory per partition (topic-partition)
        recovery-point-offset-checkpoint     offset up to which each partition is fsynced
        log-start-offset-checkpoint          each partition's log start offset
        replication-offset-checkpoint        each partition's high watermark
        .kafka_cleanshutdown                 present only after a clean shutdown

On start every partition is opened cheaply (no index is read); after a clean shutdown no
recovery runs, otherwise each partition recovers from its recovery point. The clean-shutdown
marker is removed once all logs are open and written again by `close()`. A directory the caller
has just taken into use (`new_dir`) has no marker either, but nothing to recover: only a used
directory without the marker is reported as an unclean shutdown.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Mapping

from spark_log.clock import SYSTEM_CLOCK, Clock
from spark_log.storage.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CorruptCheckpointError,
    OffsetCheckpointFile,
    TopicPartition,
)
from spark_log.storage.filesystem import DEFAULT_FS, FileSystem
from spark_log.storage.log.log_config import DEFAULT_CONFIG, LogConfig
from spark_log.storage.log.log_dir_failure import LogDirFailure
from spark_log.storage.log.log_validator import RecordValidator
from spark_log.storage.log.partition_dir import (
    DELETE_DIR_SUFFIX,
    is_legal_topic,
    parse_partition_dir,
)
from spark_log.storage.log.partition_log import PartitionLog
from spark_log.storage.log.timestamp_search import HEADER_ONLY, RecordSearch

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
_OTHER_DIR_SUFFIXES = ("-future", "-stray")


class LogManager:
    """Owns a data directory: its partition logs and checkpoint files.

    Invariants: one PartitionLog per (topic, partition) directory; checkpoints list exactly the
    open logs. Thread-safety: none. The broker calls it (and the logs it returns) from its one
    asyncio thread only.
    """

    def __init__(self, data_dir: str, *, default_config: LogConfig = DEFAULT_CONFIG,
                 topic_configs: Mapping[str, LogConfig] | None = None,
                 clock: Clock = SYSTEM_CLOCK, fs: FileSystem = DEFAULT_FS,
                 record_search: RecordSearch = HEADER_ONLY,
                 record_validator: RecordValidator | None = None,
                 new_dir: bool = False, checked_at_start: frozenset[str] = frozenset(),
                 ignored_topics: frozenset[str] = frozenset()) -> None:
        self.data_dir = os.path.abspath(data_dir)
        # Topics whose every batch is checked at each start, as after a crash: the
        # coordinators' state, which a damaged batch found later would take offline whole.
        self._checked_at_start = checked_at_start
        # Partitions kept in this directory by someone else (the quorum's metadata log).
        self._ignored_topics = ignored_topics
        self.default_config = default_config
        self.clock, self.fs = clock, fs
        self.failure = LogDirFailure(self.data_dir)
        self.failure.on_failure.append(self._save_recovery_points)
        self._record_search, self._record_validator = record_search, record_validator
        self._topic_configs: dict[str, LogConfig] = dict(topic_configs or {})
        self._logs: dict[TopicPartition, PartitionLog] = {}
        # Called with a log about to be deleted (the log cleaner stops its round on it).
        self.before_delete: list[Callable[[PartitionLog], None]] = []
        self._recovery_file = self._checkpoint(RECOVERY_POINT_CHECKPOINT)
        self._start_file = self._checkpoint(LOG_START_OFFSET_CHECKPOINT)
        self._hw_file = self._checkpoint(REPLICATION_OFFSET_CHECKPOINT)
        with self.failure.guard("loading logs from %s", self.data_dir):
            os.makedirs(self.data_dir, exist_ok=True)
            marker = os.path.join(self.data_dir, CLEAN_SHUTDOWN_FILE)
            self.had_clean_shutdown = os.path.exists(marker)
            self._load_logs()
            if self.had_clean_shutdown:
                fs.remove(marker)
                fs.fsync_dir(self.data_dir)
        log.info("Loaded %d partitions from %s (%s)", len(self._logs), self.data_dir,
                 self._previous_shutdown(new_dir))

    def _previous_shutdown(self, new_dir: bool) -> str:
        """How the directory's previous user left it, for the start-up log line."""
        if self.had_clean_shutdown:
            return "clean shutdown"
        if new_dir and not self._logs:
            return "new data directory, nothing to recover"
        return "unclean shutdown: logs recovered from their recovery points"

    def _checkpoint(self, name: str) -> OffsetCheckpointFile:
        return OffsetCheckpointFile(os.path.join(self.data_dir, name), self.fs)

    def _read_checkpoint(self, file: OffsetCheckpointFile) -> dict[TopicPartition, int]:
        try:
            return file.read()
        except CorruptCheckpointError as e:
            log.warning("Ignoring unreadable checkpoint (%s); affected logs recover fully", e)
            return {}

    def _load_logs(self) -> None:
        recovery = self._read_checkpoint(self._recovery_file)
        starts = self._read_checkpoint(self._start_file)
        watermarks = self._read_checkpoint(self._hw_file)
        # The entries' types come with the listing: no stat per partition.
        with os.scandir(self.data_dir) as listing:
            dirs = sorted(entry.name for entry in listing if entry.is_dir())
        for name in dirs:
            path = os.path.join(self.data_dir, name)
            if name.endswith(DELETE_DIR_SUFFIX):
                log.info("Finishing the deletion of %s", path)
                self.fs.remove_tree(path)
                continue
            tp = parse_partition_dir(name)
            if tp is None or name.endswith(_OTHER_DIR_SUFFIXES):
                log.warning("Skipping %s: not a partition directory", path)
                continue
            if tp[0] in self._ignored_topics:
                continue
            check_all = tp[0] in self._checked_at_start
            self._logs[tp] = self._open(tp, self.topic_config(tp[0]),
                                        recovery_point=0 if check_all else recovery.get(tp, 0),
                                        log_start_offset=starts.get(tp, 0),
                                        high_watermark=watermarks.get(tp, 0),
                                        clean=self.had_clean_shutdown and not check_all)

    def _open(self, tp: TopicPartition, config: LogConfig, clean: bool = False,
              **offsets: int) -> PartitionLog:
        return PartitionLog(self.data_dir, tp[0], tp[1], config, clock=self.clock, fs=self.fs,
                            failure=self.failure, had_clean_shutdown=clean,
                            record_search=self._record_search,
                            record_validator=self._record_validator, **offsets)

    # ---- partitions ---------------------------------------------------------------------

    def topic_config(self, topic: str) -> LogConfig:
        return self._topic_configs.get(topic, self.default_config)

    def partitions(self) -> list[TopicPartition]:
        return sorted(self._logs)

    def logs(self) -> list[PartitionLog]:
        return [self._logs[tp] for tp in sorted(self._logs)]

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def get_or_create(self, topic: str, partition: int, config: LogConfig | None = None
                      ) -> PartitionLog:
        """The partition's log, created empty if new; a `config` given becomes the topic's."""
        existing = self._logs.get((topic, partition))
        if existing is not None:
            return existing
        if not is_legal_topic(topic) or partition < 0:
            raise ValueError(f"illegal topic partition {topic!r} {partition}")
        self.failure.check()
        if config is not None:
            self._topic_configs[topic] = config
        created = self._open((topic, partition), self.topic_config(topic),
                             clean=self.had_clean_shutdown)
        self._logs[(topic, partition)] = created
        return created

    def delete(self, topic: str, partition: int) -> bool:
        """Delete the partition's log and directory; False if there was none."""
        doomed = self._logs.pop((topic, partition), None)
        if doomed is None:
            return False
        for hook in list(self.before_delete):
            hook(doomed)
        doomed.delete()
        return True

    def update_config(self, topic: str, config: LogConfig) -> None:
        """New topic config for future and existing partitions of `topic`."""
        self._topic_configs[topic] = config
        for (t, _), partition_log in self._logs.items():
            if t == topic:
                partition_log.update_config(config)

    # ---- periodic work ------------------------------------------------------------------

    def flush_due(self, now_mono_ms: int | None = None) -> None:
        """fsync rolled segments and logs past flush.ms; remove expired .deleted files."""
        for partition_log in self.logs():
            partition_log.flush_due(now_mono_ms)

    def run_retention(self, now_ms: int | None = None) -> int:
        """Delete segments past retention or below the log start offset; returns how many."""
        return sum(partition_log.delete_old_segments(now_ms) for partition_log in self.logs())

    def checkpoint(self) -> None:
        """Flush every log, then write the recovery point, log start offset and high
        watermark checkpoints."""
        self.failure.check()
        for partition_log in self.logs():
            partition_log.flush()
        self._write_checkpoints()

    def _write_checkpoints(self) -> None:
        with self.failure.guard("writing checkpoints in %s", self.data_dir):
            offsets = {tp: lg.checkpoint_offsets() for tp, lg in self._logs.items()}
            self._recovery_file.write({tp: o[0] for tp, o in offsets.items()})
            self._start_file.write({tp: o[1] for tp, o in offsets.items()})
            self._hw_file.write({tp: o[2] for tp, o in offsets.items()})

    def _save_recovery_points(self) -> None:
        """On the directory's failure: write the recovery points as they are (a log found
        damaged has lowered its own), so the next start recovers from there. Best effort: the
        disk may be what failed."""
        try:
            self._recovery_file.write({tp: lg.recovery_point for tp, lg in self._logs.items()})
        except OSError as e:
            log.error("Could not save the recovery points in %s: %s", self.data_dir, e)

    def close(self) -> None:
        """Clean shutdown: flush and close every log, write the checkpoints, then the
        clean-shutdown marker. After a storage failure the files are only released and no
        marker is written, so the next start recovers."""
        if self.failure.failed:
            for partition_log in self.logs():
                partition_log.release()
            return
        for partition_log in self.logs():
            partition_log.close()
        self._write_checkpoints()
        with self.failure.guard("marking a clean shutdown of %s", self.data_dir):
            marker = os.path.join(self.data_dir, CLEAN_SHUTDOWN_FILE)
            fd = self.fs.open(marker, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            try:
                body = json.dumps({"version": 0, "brokerEpoch": -1}).encode()
                self.fs.write_fully(fd, [body], 0)
                self.fs.fsync(fd)
            finally:
                self.fs.close(fd)
            self.fs.fsync_dir(self.data_dir)
