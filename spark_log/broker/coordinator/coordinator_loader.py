"""Reading a coordinator's partition (`__consumer_offsets`, `__transaction_state`) from its log
start to its end to load it: decoded batches in offset order, a damaged batch skipped.

Storage hands out only whole batches whose length, CRC and offsets it has checked. What it does
not check is whether the records inside decode: a payload that does not decompress, an unknown
codec id, records cut short or with a bad varint, record offsets outside the batch. Such a batch
is skipped, logged at ERROR with the partition, the batch's offsets and why, and loading goes on
with the next batch, so the damage costs the records of that batch and nothing else. Kafka loses
more here: its group coordinator fails the partition's whole load, its transaction coordinator
stops at the fault and keeps only what came before. A chunk whose batches cannot even be walked
(impossible for bytes storage checked) ends the load where it is, logged as well.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from spark_log.records import BatchView, CorruptRecordError, DecodedBatch

if TYPE_CHECKING:
    from spark_log.storage.log.partition_log import PartitionLog

log = logging.getLogger(__name__)

LOAD_CHUNK_BYTES = 1 << 20


async def read_for_load(partition_log: PartitionLog, name: str
                        ) -> AsyncIterator[tuple[DecodedBatch, int]]:
    """Yield (batch, start) for each decodable batch of the partition `name` ("topic-N"), in
    offset order; records below `start` were yielded before (a read that began inside a batch)
    and must be left out. Other connections are served between chunks."""
    offset, end = partition_log.log_start_offset, partition_log.log_end_offset
    while offset < end:
        data = partition_log.read(offset, LOAD_CHUNK_BYTES, max_offset=end).read_bytes()
        if not data:
            return
        position, start = 0, offset
        while position < len(data):
            try:
                view = BatchView(data, position)
            except CorruptRecordError as e:
                log.error("%s: the batches from offset %d on cannot be read, so the load ends "
                          "there: %s", name, offset, e)
                return
            position += view.size
            header = view.header
            if header.next_offset <= offset:
                continue
            batch = decode_for_load(view, name)
            if batch is not None:
                yield batch, offset
            offset = header.next_offset
        if offset == start:
            log.error("%s: a read at offset %d made no progress, so the load ends there",
                      name, offset)
            return
        await asyncio.sleep(0)


def decode_for_load(view: BatchView, name: str) -> DecodedBatch | None:
    """The batch decoded and its record offsets checked, or None (logged) if it cannot be."""
    header = view.header
    try:
        batch = view.decode()
        _check_offsets(batch)
    except Exception as e:  # decoding depends on the bytes alone: whichever library raised,
        # these bytes cannot be loaded
        reason = str(e) if isinstance(e, CorruptRecordError) else f"{type(e).__name__}: {e}"
        log.error("%s: batch at offsets %d..%d (%d records) cannot be decoded and is skipped: %s",
                  name, header.base_offset, header.last_offset, header.records_count, reason)
        return None
    return batch


def _check_offsets(batch: DecodedBatch) -> None:
    """Record offsets must increase and lie within the batch's [base, last] offsets."""
    header = batch.header
    previous = header.base_offset - 1
    for record in batch.records:
        if not previous < record.offset <= header.last_offset:
            raise CorruptRecordError(
                f"record offset {record.offset} is not between the previous one ({previous}) "
                f"and the batch's last offset {header.last_offset}")
        previous = record.offset
