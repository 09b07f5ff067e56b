"""Settings of the log cleaner as a whole (Kafka's CleanerConfig): whether it runs, how long it
sleeps when no log needs cleaning, the memory of its offset map and the size of its reads.

Per-topic cleaning settings (min.cleanable.dirty.ratio, delete.retention.ms,
min/max.compaction.lag.ms, segment.bytes) live in `LogConfig`; the broker's log.cleaner.*
settings are their defaults there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MIB = 1 << 20


@dataclass(frozen=True)
class CleanerConfig:
    """Immutable, so the cleaner's worker thread may read it.

    `dedupe_buffer_size` bounds the offset map (log.cleaner.dedupe.buffer.size), filled up to
    `dedupe_buffer_load_factor` of it; a dirty section with more distinct keys than fit is
    cleaned in several rounds. `io_buffer_size` is the size of each read of a segment
    (log.cleaner.io.buffer.size); a batch larger than it is read whole.
    """

    enable: bool = True
    backoff_ms: int = 15_000
    dedupe_buffer_size: int = 128 * MIB
    dedupe_buffer_load_factor: float = 0.9
    io_buffer_size: int = 1 * MIB

    def __post_init__(self) -> None:
        if self.backoff_ms < 0:
            raise ValueError(f"log.cleaner.backoff.ms must be >= 0, got {self.backoff_ms}")
        if not 0 < self.dedupe_buffer_load_factor <= 1:
            raise ValueError("log.cleaner.io.buffer.load.factor must be in (0, 1]")
        if self.io_buffer_size < 1024 or self.dedupe_buffer_size < 1024:
            raise ValueError("cleaner buffers must be at least 1 KiB")

    @classmethod
    def from_broker(cls, get: Callable[[str], Any]) -> CleanerConfig:
        """From broker settings by Kafka name (`BrokerConfig.get`)."""
        return cls(enable=bool(get("log.cleaner.enable")),
                   backoff_ms=int(get("log.cleaner.backoff.ms")))
