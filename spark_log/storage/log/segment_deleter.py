"""Deleting segments in two steps, as Kafka does: rename to `.deleted` now, remove the files
after file.delete.delay.ms.

The rename takes the segment out of the log at once and durably (directory fsync); removing
the files later gives in-flight readers time to finish (and a FetchSlice keeps its fd valid
even after removal). `.deleted` files left by a crash are removed by the loader on open.
"""

from __future__ import annotations

from spark_log.clock import Clock
from spark_log.storage.filesystem import FileSystem
from spark_log.storage.log.segment import Segment


class SegmentDeleter:
    """Segments renamed away and waiting for removal. Not thread-safe: owned by one log."""

    def __init__(self, directory: str, fs: FileSystem, clock: Clock) -> None:
        self.dir, self.fs, self.clock = directory, fs, clock
        self._pending: list[tuple[int, Segment]] = []

    @property
    def pending(self) -> list[Segment]:
        return [segment for _, segment in self._pending]

    def delete(self, segments: list[Segment], delay_ms: int) -> None:
        """Rename `segments` to .deleted; remove them once `delay_ms` has passed."""
        if not segments:
            return
        for segment in segments:
            segment.rename_to_deleted()
        self.fs.fsync_dir(self.dir)
        due = self.clock.monotonic_ms() + delay_ms
        self._pending += [(due, segment) for segment in segments]
        self.delete_due(self.clock.monotonic_ms())

    def delete_due(self, now_mono_ms: int) -> int:
        """Remove the files of segments whose delay is over; returns how many."""
        due = [segment for t, segment in self._pending if t <= now_mono_ms]
        if due:
            self._pending = [(t, s) for t, s in self._pending if t > now_mono_ms]
            for segment in due:
                segment.delete_files()
            self.fs.fsync_dir(self.dir)
        return len(due)

    def release(self) -> None:
        """Close the pending segments' files without removing them (the loader will)."""
        for _, segment in self._pending:
            segment.release()
        self._pending = []
