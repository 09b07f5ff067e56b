"""Committing a streaming query's progress to its Kafka consumer group, for lag monitoring.

After Spark finishes a micro-batch it calls `commit(end)` (and it asks `latestOffset(start)` only
once the batch ending at `start` is done); `GroupCommitter` stores those offsets as the group's
committed offsets (OffsetCommit through AdminClient.alterConsumerGroupOffsets: the group
needs no members), so `kafka-consumer-groups --describe`, Burrow or any lag exporter shows the
query's lag. Commits run on one background thread and coalesce (only the newest end matters),
so a slow or unavailable group coordinator never delays a micro-batch; `close()` waits a
bounded time for the last commit, so the final batch of an AvailableNow run is committed too.
The checkpoint, not the group, remains the source of truth for where a query resumes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


class GroupCommitter:
    """Asynchronous, coalescing committer. Invariant: the last offsets passed to `commit` are
    the ones committed once the thread is idle (unless the cluster refuses them)."""

    def __init__(self, bootstrap: str, kafka_conf: Mapping[str, str], group: str,
                 timeout_ms: int) -> None:
        self.bootstrap = bootstrap
        self.kafka_conf = dict(kafka_conf)
        self.group = group
        self.timeout_ms = timeout_ms
        self._pending: dict[TopicPartition, int] | None = None
        self._cond = threading.Condition()
        self._busy = False
        self._sending: dict[TopicPartition, int] | None = None
        self._closed = False
        self._thread: threading.Thread | None = None
        self.committed: dict[TopicPartition, int] = {}
        self.last_error: str | None = None

    def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        with self._cond:
            # A batch's end comes twice (latestOffset(start) of the next batch, then Spark's
            # commit(end) of it): the second time it is usually still being committed.
            newest = self._pending or self._sending or self.committed
            if dict(offsets) == newest:
                return
            self._pending = dict(offsets)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="pylog-group-commit",
                                                daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def close(self, timeout_s: float = 15.0) -> None:
        """Wait (bounded) until the newest offsets are committed, then stop the thread."""
        with self._cond:
            self._cond.wait_for(lambda: self._pending is None and not self._busy, timeout_s)
            self._closed = True
            self._cond.notify_all()

    def _run(self) -> None:
        from .client import Cluster

        cluster: Cluster | None = None
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._pending is not None or self._closed)
                if self._pending is None:
                    return
                offsets, self._pending, self._busy = self._pending, None, True
                self._sending = offsets
            try:
                if cluster is None:  # librdkafka's admin client, not the kept wire one: with
                    # it a restarted AvailableNow query's last commit went missing now and then
                    # (cause not found); commits are off the micro-batch's path anyway
                    cluster = Cluster(self.bootstrap, self.kafka_conf, self.timeout_ms)
                cluster.commit(self.group, offsets)
                self.committed = offsets
                self.last_error = None
            except Exception as e:  # the query must not fail because monitoring failed
                if self.last_error is None:
                    log.warning("Could not commit offsets to consumer group %r on %s: %s",
                                self.group, self.bootstrap, e)
                self.last_error = str(e)
            finally:
                with self._cond:
                    self._busy = False
                    self._sending = None
                    self._cond.notify_all()
