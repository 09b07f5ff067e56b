"""A produce request's batch checked in one native call (`records.client_batch`) gives the log
validator's own walk's result on any input: the same assigned offsets and headers, or the same
error (type and message). The walk, which runs alone without the extension, defines it."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_log.records import client_batch
from spark_log.records.batch_header import CONTROL_BIT, TIMESTAMP_TYPE_BIT, read_header
from spark_log.storage.append_info import AppendOrigin
from spark_log.storage.log import log_validator
from spark_log.storage.log.log_config import LogConfig
from tests.protocol.hand_readers import mutated

from ..batches import DEFAULT_TS, make_batch
from ..conftest import small_config

CHECKS = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
CONFIGS = {
    "default": small_config(),
    "compacted": small_config(**{"cleanup.policy": "compact"}),
    "log append time": small_config(**{"message.timestamp.type": "LogAppendTime"}),
    "small messages": small_config(**{"max.message.bytes": "120"}),
}


def outcome(records: bytes, config: LogConfig, next_offset: int = 40,
            leader_epoch: int = 7) -> tuple:
    """What validate_append makes of a client's append: its buffers and headers, or its error."""
    try:
        result = log_validator.validate_append(
            records, config=config, origin=AppendOrigin.CLIENT, next_offset=next_offset,
            leader_epoch=leader_epoch, now_ms=DEFAULT_TS, topic_partition="t-0")
    except Exception as e:  # the error itself is what is compared
        return ("error", type(e), str(e))
    return ("ok", b"".join(bytes(b) for b in result.buffers), result.headers,
            result.record_count, result.max_timestamp, result.offset_of_max_timestamp,
            result.log_append_time, result.size)


def assert_native_agrees(records: bytes, config: LogConfig, monkeypatch: pytest.MonkeyPatch,
                         next_offset: int = 40, leader_epoch: int = 7) -> tuple:
    native = outcome(records, config, next_offset, leader_epoch)
    with monkeypatch.context() as m:
        m.setattr(log_validator, "check_client_batch", lambda view, limit, offset, epoch: None)
        walked = outcome(records, config, next_offset, leader_epoch)
    assert native == walked
    return native


def test_the_extension_is_built_and_used():
    assert client_batch.NATIVE, ("spark_log/records/_native_scan.c is not built: `pip install "
                                 "-e .` (what ./dev runs) compiles it")
    batch = make_batch(3)
    final, header = client_batch.check_client_batch(memoryview(batch), 10**6, 40, 7)
    assert final == read_header(batch)._replace(base_offset=40, partition_leader_epoch=7)
    assert read_header(header + batch[len(header):]) == final


@pytest.mark.parametrize("batch", [
    make_batch(3),
    make_batch(1, producer_id=5, producer_epoch=1, base_sequence=0),
    make_batch(2, base_offset=9),                      # a client's base offset must be 0
    make_batch(2, records_count=3),                    # count and offset delta disagree
    make_batch(1, attributes=CONTROL_BIT),             # clients write no control batches
    make_batch(1, producer_id=5, base_sequence=-1),    # a producer id needs a sequence
    make_batch(1, attributes=TIMESTAMP_TYPE_BIT),      # producers may not claim LogAppendTime
    make_batch(1, key=None),                           # a compacted topic needs keys
    make_batch(4, value_size=60),                      # over max.message.bytes "small"
    make_batch(2) + make_batch(1),                     # two batches in one produce
    b"",
    make_batch(1)[:40],
], ids=lambda b: str(len(b)))
@pytest.mark.parametrize("config", CONFIGS.values(), ids=CONFIGS.keys())
def test_client_batches_are_decided_as_the_walk_decides(batch, config, monkeypatch):
    assert_native_agrees(batch, config, monkeypatch)


@pytest.mark.parametrize("config", CONFIGS.values(), ids=CONFIGS.keys())
@CHECKS
@given(records=st.integers(1, 4), changes=st.lists(
    st.tuples(st.integers(0), st.integers(0, 255)), max_size=4), cut=st.integers(0))
def test_mutated_batches_are_decided_as_the_walk_decides(config, records, changes, cut):
    batch = mutated(make_batch(records), changes, cut)
    with pytest.MonkeyPatch.context() as monkeypatch:
        assert_native_agrees(batch, config, monkeypatch)


@pytest.mark.parametrize(("next_offset", "leader_epoch"), [
    (0, 0), (2**40 + 3, 2**31 - 1), (2**63 - 10, 255), (256, 2**24 + 1)])
@pytest.mark.parametrize("config", CONFIGS.values(), ids=CONFIGS.keys())
def test_offsets_and_epochs_of_every_width_are_written_as_the_walk_writes_them(
        next_offset, leader_epoch, config, monkeypatch):
    result = assert_native_agrees(make_batch(3), config, monkeypatch, next_offset, leader_epoch)
    if result[0] == "ok":
        assert result[2][0].base_offset == next_offset
        assert read_header(result[1]).partition_leader_epoch == leader_epoch


def test_a_crc_mismatch_is_the_walks_corrupt_record_error(monkeypatch):
    batch = bytearray(make_batch(2))
    batch[-1] ^= 0xFF
    result = assert_native_agrees(bytes(batch), CONFIGS["default"], monkeypatch)
    assert result[0] == "error" and "CRC mismatch" in result[2]


def test_the_walk_stands_in_when_the_extension_is_not_built():
    code = ("import sys; sys.modules['spark_log.records._native_scan'] = None\n"
            "from spark_log.records import client_batch\n"
            "from tests.storage.batches import make_batch\n"
            "assert not client_batch.NATIVE\n"
            "assert client_batch.check_client_batch(memoryview(make_batch(2)), 10**6, 0, 0) "
            "is None\n")
    subprocess.run([sys.executable, "-c", code], check=True)
