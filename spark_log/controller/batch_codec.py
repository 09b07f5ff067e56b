"""The quorum's batches as Kafka writes them in `__cluster_metadata`: one raft `Batch` is one
RecordBatch v2 (base offset, partition leader epoch = the batch's epoch, one record per entry,
null key, the record bytes as value, no producer), and the leader's epoch-start control batch is
a Kafka control batch holding one LeaderChangeMessage (control type 2), so Kafka's tools read
the log. The same bytes go to disk and over the wire (Fetch responses).

The raft state machine marks its epoch-start record with a placeholder (`LEADER_CHANGE_RECORD`);
`LeaderChanges` turns it into the LeaderChangeMessage of that epoch (the leader, the voters and
those that granted their vote). Only the replica that led an epoch holds its placeholder: any
other replica has the message itself, read from the leader's response or from disk.
"""

from __future__ import annotations

from collections.abc import Iterable

from kio.schema.leader_change_message.v0 import LeaderChangeMessage

from spark_log.protocol import encode_entity
from spark_log.protocol.entity_build import build
from spark_log.raft.messages import Batch
from spark_log.raft.replica import LEADER_CHANGE_RECORD
from spark_log.records import (
    BatchView,
    ControlRecordType,
    CorruptRecordError,
    DecodedBatch,
    Record,
    build_batch,
    iter_batches,
    parse_control_record_type,
    peek_size,
    record_values,
)
from spark_log.records.control_record import control_record_key

LEADER_CHANGE_VERSION = 0  # Kafka's ControlRecordUtils.LEADER_CHANGE_CURRENT_VERSION


class LeaderChanges:
    """The LeaderChangeMessage of each epoch this replica led: its voters and the voters that
    granted it their vote (itself included). Invariant: an epoch's granting voters only grow
    until its message is first written, and the message written for an epoch is the one every
    later encoding of its placeholder gives (the grants are frozen at first use). Not
    thread-safe."""

    def __init__(self, node_id: int, voters: frozenset[int]) -> None:
        self.node_id, self.voters = node_id, voters
        self._granted: dict[int, set[int]] = {}
        self._frozen: dict[int, bytes] = {}

    def granted(self, epoch: int, voter: int) -> None:
        """`voter` granted this replica its vote in `epoch`."""
        if epoch not in self._frozen:
            self._granted.setdefault(epoch, {self.node_id}).add(voter)

    def value(self, epoch: int) -> bytes:
        """The LeaderChangeMessage bytes of `epoch`, led by this replica."""
        found = self._frozen.get(epoch)
        if found is None:
            granting = sorted(self._granted.pop(epoch, {self.node_id}))
            found = self._frozen[epoch] = leader_change_value(self.node_id, self.voters,
                                                              granting)
        return found


def leader_change_value(leader_id: int, voters: Iterable[int], granting: Iterable[int]) -> bytes:
    message = build(LeaderChangeMessage, {
        "version": LEADER_CHANGE_VERSION, "leader_id": leader_id,
        "voters": [{"voter_id": v} for v in sorted(voters)],
        "granting_voters": [{"voter_id": v} for v in granting]})
    return encode_entity(message)


def encode_batch(batch: Batch, timestamp_ms: int, leader_changes: LeaderChanges) -> bytes:
    """`batch` as one RecordBatch v2."""
    if batch.control:
        key: bytes | None = control_record_key(ControlRecordType.LEADER_CHANGE)
        values = [leader_changes.value(batch.epoch) if r == LEADER_CHANGE_RECORD else r
                  for r in batch.records]
    else:
        key, values = None, list(batch.records)
    records = [Record(batch.base_offset + i, timestamp_ms, key, value)
               for i, value in enumerate(values)]
    return build_batch(records, base_offset=batch.base_offset, is_control=batch.control,
                       partition_leader_epoch=batch.epoch)


def encode_batches(batches: Iterable[Batch], timestamp_ms: int,
                   leader_changes: LeaderChanges) -> bytes:
    return b"".join(encode_batch(b, timestamp_ms, leader_changes) for b in batches)


def decode_batches(data: bytes | memoryview, *, allow_partial_tail: bool = False
                   ) -> list[Batch]:
    """The batches of `data` (whole RecordBatches, CRCs checked). A torn last batch is dropped
    when `allow_partial_tail` (a fetch response may end inside one); any other damage raises
    CorruptRecordError."""
    view = memoryview(data)
    out: list[Batch] = []
    pos = 0
    try:
        for batch in iter_batches(view):
            out.append(_quorum_batch(batch))
            pos = batch.position + batch.size
    except CorruptRecordError:
        if not (allow_partial_tail and _is_partial(view, pos)):
            raise
    return out


def _quorum_batch(batch: BatchView) -> Batch:
    """A batch read from the log or a fetch: a data batch's values are read without decoding
    each record whole, unless the records are not a quorum batch's, read then by `decode_batch`
    (which names what is wrong)."""
    header = batch.header
    if not header.is_control and header.records_count > 0:
        batch.verify_crc()
        section = batch.records_section()
        values = record_values(section, 0, len(section), header.records_count)
        if values is not None:
            return Batch(header.base_offset, header.partition_leader_epoch, tuple(values))
    return decode_batch(batch.decode())


def decode_batch(decoded: DecodedBatch) -> Batch:
    """A decoded RecordBatch as a raft batch; CorruptRecordError if it cannot be one."""
    header = decoded.header
    if not decoded.records:
        raise CorruptRecordError(f"batch at offset {header.base_offset} holds no record")
    if header.is_control:
        for record in decoded.records:
            parse_control_record_type(record.key)  # a key that is not a control key raises
    values = tuple(r.value if r.value is not None else b"" for r in decoded.records)
    if [r.offset for r in decoded.records] != list(range(header.base_offset,
                                                          header.base_offset + len(values))):
        raise CorruptRecordError(f"batch at offset {header.base_offset} has gaps in its offsets")
    return Batch(header.base_offset, header.partition_leader_epoch, values,
                 control=header.is_control)


def _is_partial(view: memoryview, pos: int) -> bool:
    """Whether the bytes from `pos` are the start of a batch cut short (not a damaged one)."""
    size = peek_size(view, pos)
    return size is None or size > len(view) - pos
