"""The metadata log on real files: batches, control batches, elections and snapshots written and
read back in Kafka's layout; a log torn at its tail after a crash; damaged and missing files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from kio.schema.leader_change_message.v0 import LeaderChangeMessage

from spark_log.controller.metadata_log import MetadataLog
from spark_log.controller.quorum_errors import MetadataLogError
from spark_log.controller.quorum_state_file import write_election_state
from spark_log.controller.snapshot_files import snapshot_file_name, write_snapshot
from spark_log.protocol import decode_entity
from spark_log.raft.election_state import ElectionState
from spark_log.raft.messages import OffsetAndEpoch
from spark_log.records import ControlRecordType, iter_batches, parse_control_record_type
from spark_log.storage.filesystem import DEFAULT_FS

from .support import data_batch, epoch_start, history, snapshot_bytes

VOTERS = frozenset({1, 2, 3})


def open_log(tmp_path: Path, node: int = 1, **kw: object) -> tuple[MetadataLog, object]:
    mlog = MetadataLog(tmp_path, node, VOTERS, **kw)  # type: ignore[arg-type]
    return mlog, mlog.open()


def write_history(tmp_path: Path, epochs: list[int], per_epoch: int = 3, **kw: object) -> list:
    mlog, _ = open_log(tmp_path, **kw)
    mlog.persist_election(ElectionState(max(epochs), 1, 1))
    batches = history(epochs, per_epoch)
    mlog.append(batches)
    mlog.flush()
    mlog.close()
    return batches


def segment_files(tmp_path: Path) -> list[str]:
    return sorted(n for n in os.listdir(tmp_path / "__cluster_metadata-0") if n.endswith(".log"))


def test_a_new_directory_starts_empty_in_epoch_0(tmp_path: Path) -> None:
    mlog, loaded = open_log(tmp_path)
    assert loaded.election == ElectionState(0)
    assert (loaded.log.start_offset, loaded.log.end_offset, loaded.snapshot_data) == (0, 0, None)
    assert (tmp_path / "__cluster_metadata-0").is_dir()
    mlog.close()


def test_batches_and_elections_round_trip_through_kafkas_layout(tmp_path: Path) -> None:
    batches = write_history(tmp_path, [1, 3])
    _, loaded = open_log(tmp_path)
    assert loaded.election == ElectionState(3, 1, 1)
    got = loaded.log.batches
    assert [(b.base_offset, b.epoch, b.control) for b in got] == \
        [(b.base_offset, b.epoch, b.control) for b in batches]
    assert [b.records for b in got if not b.control] == \
        [b.records for b in batches if not b.control]
    doc = json.loads((tmp_path / "__cluster_metadata-0" / "quorum-state").read_text())
    assert doc == {"leaderId": 1, "leaderEpoch": 3, "votedId": 1, "appliedOffset": 0,
                   "currentVoters": [{"voterId": 1}, {"voterId": 2}, {"voterId": 3}],
                   "data_version": 0}
    assert segment_files(tmp_path) == ["00000000000000000000.log"]


def test_an_epoch_start_is_a_kafka_control_batch_with_a_leader_change_message(
        tmp_path: Path) -> None:
    mlog, _ = open_log(tmp_path, node=2)
    mlog.persist_election(ElectionState(4, 2, 2))
    mlog.leader_changes.granted(4, 3)
    mlog.append([epoch_start(0, 4), data_batch(1, 4, b"x")])
    mlog.close()
    raw = (tmp_path / "__cluster_metadata-0" / "00000000000000000000.log").read_bytes()
    first, second = list(iter_batches(raw))
    assert first.header.is_control and first.header.partition_leader_epoch == 4
    (record,) = first.records()
    assert parse_control_record_type(record.key) == ControlRecordType.LEADER_CHANGE
    message = decode_entity(LeaderChangeMessage, record.value)
    assert message.leader_id == 2 and [v.voter_id for v in message.voters] == [1, 2, 3]
    assert [v.voter_id for v in message.granting_voters] == [2, 3]
    assert not second.header.is_control and second.header.base_offset == 1
    _, loaded = open_log(tmp_path, node=2)
    assert loaded.log.batches[0].records == (record.value,)  # the message itself, read back


def test_truncation_removes_the_batches_from_an_offset(tmp_path: Path) -> None:
    write_history(tmp_path, [1, 2])
    mlog, _ = open_log(tmp_path)
    mlog.truncate(5)
    mlog.append([epoch_start(5, 3)])
    mlog.persist_election(ElectionState(3))
    mlog.close()
    _, loaded = open_log(tmp_path)
    assert [(b.base_offset, b.epoch) for b in loaded.log.batches] == \
        [(0, 1), (1, 1), (2, 1), (3, 1), (4, 2), (5, 3)]


def test_a_snapshot_drops_the_segments_and_snapshots_below_it(tmp_path: Path) -> None:
    write_history(tmp_path, [1, 2, 3], per_epoch=40, segment_bytes=2048)
    assert len(segment_files(tmp_path)) > 3
    mlog, loaded = open_log(tmp_path, segment_bytes=2048)
    mlog.save_snapshot(OffsetAndEpoch(41, 1), snapshot_bytes("first"))
    mlog.save_snapshot(OffsetAndEpoch(100, 2), snapshot_bytes("second"))
    directory = tmp_path / "__cluster_metadata-0"
    assert sorted(n for n in os.listdir(directory) if ".checkpoint" in n) == \
        ["00000000000000000100-0000000002.checkpoint"]
    first_segment = int(segment_files(tmp_path)[0].split(".")[0])
    assert 0 < first_segment <= 100
    mlog.close()
    _, loaded = open_log(tmp_path, segment_bytes=2048)
    assert loaded.log.snapshot_id == (100, 2) and loaded.snapshot_data == snapshot_bytes("second")
    assert (loaded.log.start_offset, loaded.log.end_offset) == (100, 123)
    assert loaded.log.batches[0].base_offset == 100


def test_an_installed_snapshot_replaces_the_log(tmp_path: Path) -> None:
    write_history(tmp_path, [1, 2])
    mlog, _ = open_log(tmp_path)
    mlog.install_snapshot(OffsetAndEpoch(500, 2), snapshot_bytes("leader's"))
    mlog.append([data_batch(500, 2, b"next")])
    mlog.close()
    _, loaded = open_log(tmp_path)
    assert loaded.log.snapshot_id == (500, 2) and loaded.snapshot_data == snapshot_bytes("leader's")
    assert [(b.base_offset, b.records) for b in loaded.log.batches] == [(500, (b"next",))]


def test_a_crash_after_a_snapshot_was_fetched_but_before_the_log_went_empties_it(
        tmp_path: Path) -> None:
    """Kafka's truncateToLatestSnapshot: a snapshot ahead of the log, or of a later epoch,
    replaces it at the next start."""
    write_history(tmp_path, [1, 2])
    directory = tmp_path / "__cluster_metadata-0"
    write_election_state(directory, ElectionState(3, 2), VOTERS)
    write_snapshot(directory, OffsetAndEpoch(6, 3), snapshot_bytes("fetched"), DEFAULT_FS)
    _, loaded = open_log(tmp_path)
    assert loaded.log.snapshot_id == (6, 3) and loaded.log.batches == []
    assert loaded.log.end() == (6, 3)


def test_a_log_torn_at_its_tail_keeps_every_whole_batch(tmp_path: Path) -> None:
    write_history(tmp_path, [1, 2])
    log_file = tmp_path / "__cluster_metadata-0" / "00000000000000000000.log"
    size = log_file.stat().st_size
    os.truncate(log_file, size - 7)  # a crash in the middle of the last write
    _, loaded = open_log(tmp_path)
    assert loaded.log.end_offset == 7 and loaded.log.batches[-1].base_offset == 6
    with open(log_file, "ab") as f:  # garbage after the last whole batch
        f.write(os.urandom(100))
    _, loaded = open_log(tmp_path)
    assert loaded.log.end_offset == 7


@pytest.mark.parametrize("content", [b"", b"{not json", b'{"leaderEpoch": -3, "leaderId": 1, '
                                                         b'"votedId": 1}', b"\x00" * 40])
def test_a_damaged_quorum_state_stops_the_start(tmp_path: Path, content: bytes) -> None:
    write_history(tmp_path, [1])
    path = tmp_path / "__cluster_metadata-0" / "quorum-state"
    path.write_bytes(content)
    with pytest.raises(MetadataLogError) as e:
        open_log(tmp_path)
    assert str(path) in str(e.value) and "is damaged" in str(e.value)
    assert "Restore it from a backup" in str(e.value)


def test_a_missing_quorum_state_is_refused_once_the_replica_took_part(tmp_path: Path) -> None:
    write_history(tmp_path, [2])
    path = tmp_path / "__cluster_metadata-0" / "quorum-state"
    path.unlink()
    with pytest.raises(MetadataLogError, match="is missing although the log holds records up "
                                               r"to offset 4 \(epoch 2\)"):
        open_log(tmp_path)


def test_a_quorum_state_older_than_the_log_is_refused(tmp_path: Path) -> None:
    write_history(tmp_path, [1, 5])
    mlog = MetadataLog(tmp_path, 1, VOTERS)
    write_election_state(mlog.dir, ElectionState(4, 1, 1), VOTERS)
    with pytest.raises(MetadataLogError, match="records epoch 4, the log holds epoch 5"):
        mlog.open()


def test_a_damaged_snapshot_is_set_aside_for_an_older_usable_one(tmp_path: Path) -> None:
    write_history(tmp_path, [1, 2])
    mlog, _ = open_log(tmp_path)
    mlog.save_snapshot(OffsetAndEpoch(4, 1), snapshot_bytes("old"))
    mlog.close()
    directory = tmp_path / "__cluster_metadata-0"
    newer = directory / snapshot_file_name(OffsetAndEpoch(8, 2))
    newer.write_bytes(snapshot_bytes("new")[:-5])  # damaged: cut short
    (directory / "00000000000000000009-0000000002.checkpoint.part").write_bytes(b"partial")
    _, loaded = open_log(tmp_path)
    assert loaded.log.snapshot_id == (4, 1) and loaded.snapshot_data == snapshot_bytes("old")
    names = sorted(n for n in os.listdir(directory) if ".checkpoint" in n)
    assert names == ["00000000000000000004-0000000001.checkpoint",
                     "00000000000000000008-0000000002.checkpoint.damaged"]


def test_no_usable_snapshot_under_a_log_that_starts_above_zero_stops_the_start(
        tmp_path: Path) -> None:
    write_history(tmp_path, [1, 2, 3], per_epoch=40, segment_bytes=2048)
    mlog, _ = open_log(tmp_path, segment_bytes=2048)
    mlog.save_snapshot(OffsetAndEpoch(100, 2), snapshot_bytes("only"))
    mlog.close()
    path = tmp_path / "__cluster_metadata-0" / snapshot_file_name(OffsetAndEpoch(100, 2))
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # a flipped bit: the CRC no longer matches
    path.write_bytes(bytes(data))
    with pytest.raises(MetadataLogError, match="no usable snapshot covers the records below "
                                               "it") as e:
        open_log(tmp_path, segment_bytes=2048)
    assert "CRC" in str(e.value)
