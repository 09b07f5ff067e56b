"""Committing a streaming query's progress to its Kafka consumer group, for lag monitoring.

After Spark finishes a micro-batch it asks `latestOffset(start)` (only once the batch ending at
`start` is done) and later calls `commit(end)`; `GroupCommitter` stores those offsets as the
group's committed offsets (OffsetCommit: the group needs no members), so
`kafka-consumer-groups --describe`, Burrow or any lag exporter shows the query's lag.

A commit is done when `commit` returns, not later: Spark ends the driver's Python worker with
SIGTERM when a query stops, without waiting for the reader's `stop()`, so an AvailableNow run's
last commit, still on its way in the background, would be lost. A slow or unreachable group
coordinator must still not hold up the query: once a commit fails or outlasts the client
timeout, `commit` stops waiting, and a background thread keeps sending the newest offsets until
one is stored (then `commit` waits again). The checkpoint, not the group, remains the source of
truth for where a query resumes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


class GroupCommitter:
    """Coalescing committer on one background thread.

    Invariants: while the coordinator answers, the offsets passed to `commit` are stored in the
    group when it returns; the last offsets passed to `commit` are the ones committed once the
    thread is idle (unless the cluster refuses them); an end reported twice is sent once.
    """

    def __init__(self, bootstrap: str, kafka_conf: Mapping[str, str], group: str,
                 timeout_ms: int) -> None:
        self.bootstrap = bootstrap
        self.kafka_conf = dict(kafka_conf)
        self.group = group
        self.timeout_ms = timeout_ms
        self._cond = threading.Condition()
        self._pending: dict[TopicPartition, int] | None = None
        self._sending: dict[TopicPartition, int] | None = None
        self._asked = 0     # how many distinct offset sets were handed to the thread
        self._answered = 0  # how many of them the thread has finished (stored or failed)
        self._waits = True  # False after a failure or a timeout, until a commit succeeds
        self._closed = False
        self._thread: threading.Thread | None = None
        self.committed: dict[TopicPartition, int] = {}
        self.last_error: str | None = None

    def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        with self._cond:
            offsets = dict(offsets)
            # A batch's end comes twice (latestOffset(start) of the next batch, then Spark's
            # commit(end) of it); the second time there is nothing new to send.
            if offsets != (self._pending or self._sending or self.committed):
                self._pending = offsets
                self._asked += 1
                self._start_thread()
                self._cond.notify_all()
            asked = self._asked
            if self._waits and not self._cond.wait_for(lambda: self._answered >= asked,
                                                       self.timeout_ms / 1000):
                self._waits = False
                log.warning("Committing offsets to consumer group %r on %s takes longer than "
                            "%d ms; the query goes on and the commit continues in the "
                            "background", self.group, self.bootstrap, self.timeout_ms)

    def close(self, timeout_s: float = 15.0) -> None:
        """Wait (bounded) until the newest offsets are committed, then stop the thread."""
        with self._cond:
            self._cond.wait_for(lambda: self._answered >= self._asked, timeout_s)
            self._closed = True
            self._cond.notify_all()

    def _start_thread(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="pylog-group-commit",
                                            daemon=True)
            self._thread.start()

    def _run(self) -> None:
        from .wire_cluster import open_cluster

        cluster = None
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._pending is not None or self._closed)
                if self._pending is None:
                    if cluster is not None:
                        cluster.close()
                    return
                offsets, self._pending = self._pending, None
                self._sending, asked = offsets, self._asked
            stored = False
            try:
                if cluster is None:
                    cluster = open_cluster(self.bootstrap, self.kafka_conf, self.timeout_ms)
                cluster.commit(self.group, offsets)
                stored = True
            except Exception as e:  # the query must not fail because monitoring failed
                error = (f"Could not commit offsets to consumer group {self.group!r} on "
                         f"{self.bootstrap}: {e}")
                if self.last_error is None:
                    log.warning("%s", error)
                self.last_error = error
            with self._cond:
                if stored:
                    self.committed, self.last_error, self._waits = offsets, None, True
                else:
                    self._waits = False
                self._sending = None
                self._answered = asked
                self._cond.notify_all()
