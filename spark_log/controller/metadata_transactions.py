"""Metadata transactions (KIP-868) as a reader of the committed log sees them: the records from a
BeginTransactionRecord to its EndTransactionRecord take effect together, once the end is read
(a transaction may span batches); an AbortTransactionRecord drops them. What a reader may
replay comes out as runs of consecutive records with their first offset, so whoever replays a
run knows each record's offset and where the run ends.

Shared by the metadata loader (every node) and the quorum controller (its committed image).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from spark_log.metadata import MetadataRecord
from spark_log.metadata.records import (
    AbortTransactionRecord,
    BeginTransactionRecord,
    EndTransactionRecord,
)

__all__ = ["RecordRun", "TransactionError", "TransactionReader"]

_MARKERS = frozenset({BeginTransactionRecord, EndTransactionRecord, AbortTransactionRecord})


class TransactionError(ValueError):
    """A transaction marker out of place (a transaction begun inside another, an end or abort
    with none open). The message names the offset."""


@dataclass(frozen=True)
class RecordRun:
    """Records at offsets base_offset, base_offset + 1, ... to replay now, in order."""

    base_offset: int
    records: tuple[MetadataRecord, ...]

    @property
    def last_offset(self) -> int:
        return self.base_offset + len(self.records) - 1


class TransactionReader:
    """Splits committed records into the runs that may be replayed.

    Invariants: records are read in log order, each once; while a transaction is open its
    records (from its BeginTransactionRecord on) are held and nothing after them is released;
    the runs released hold every record read, at its own offset, but those of an aborted
    transaction (its AbortTransactionRecord comes out alone). Not thread-safe.
    """

    def __init__(self) -> None:
        self._held: list[MetadataRecord] | None = None
        self._begin_offset = -1

    @property
    def open(self) -> bool:
        """A transaction has begun and neither ended nor aborted."""
        return self._held is not None

    @property
    def begin_offset(self) -> int:
        """The offset of the open transaction's BeginTransactionRecord (-1: none open)."""
        return self._begin_offset if self._held is not None else -1

    def reset(self) -> None:
        """A snapshot was loaded: nothing is held."""
        self._held = None
        self._begin_offset = -1

    def read(self, base_offset: int, records: Sequence[MetadataRecord]) -> list[RecordRun]:
        """The runs to replay after the records of a batch at `base_offset`. Raises
        TransactionError (nothing held changes) for a marker out of place."""
        if _MARKERS.isdisjoint(map(type, records)):  # nearly every batch: looked at in C
            if self._held is not None:
                self._held.extend(records)
                return []
            return [RecordRun(base_offset, tuple(records))] if records else []
        held = None if self._held is None else list(self._held)
        begin = self._begin_offset
        runs: list[RecordRun] = []
        run: list[MetadataRecord] = []
        run_base = base_offset
        for index, record in enumerate(records):
            offset = base_offset + index
            if isinstance(record, BeginTransactionRecord):
                if held is not None:
                    raise TransactionError(f"a transaction begins at offset {offset} inside "
                                           f"the one begun at offset {begin}")
                _close(runs, run_base, run)
                held, begin, run = [record], offset, []
            elif held is None:
                if isinstance(record, EndTransactionRecord | AbortTransactionRecord):
                    raise TransactionError(f"{type(record).__name__} at offset {offset} "
                                           "ends no transaction")
                if not run:
                    run_base = offset
                run.append(record)
            elif isinstance(record, EndTransactionRecord):
                runs.append(RecordRun(begin, (*held, record)))
                held, run, run_base = None, [], offset + 1
            elif isinstance(record, AbortTransactionRecord):
                runs.append(RecordRun(offset, (record,)))
                held, run, run_base = None, [], offset + 1
            else:
                held.append(record)
        _close(runs, run_base, run)
        self._held, self._begin_offset = held, begin if held is not None else -1
        return runs


def _close(runs: list[RecordRun], base_offset: int, run: list[MetadataRecord]) -> None:
    if run:
        runs.append(RecordRun(base_offset, tuple(run)))
