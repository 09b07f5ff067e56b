"""The transaction coordinator in process on a ManualClock: epochs (KIP-360 retries, fencing,
exhaustion), timeouts, finishing prepared transactions after a restart, id expiry, and the
`__transaction_state` record formats and state table."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import struct
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from spark_log.broker.broker import Broker
from spark_log.broker.broker_config import BrokerConfig
from spark_log.broker.errors import KafkaError
from spark_log.broker.node import Node
from spark_log.broker.transaction.transaction_coordinator import (
    ProducerIdAndEpoch,
    TransactionCoordinator,
)
from spark_log.broker.transaction.transaction_log_records import (
    TransactionLogValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from spark_log.broker.transaction.transaction_metadata import (
    VALID_PREVIOUS,
    IllegalTransitionError,
    TransactionMetadata,
    TxnState,
)
from spark_log.clock import ManualClock
from spark_log.protocol import ErrorCode
from tests.broker.txn_support import raw_batch

TID = "app-1"
TOPIC = "events"


@contextlib.asynccontextmanager
async def running(data_dir: Path, clock: ManualClock) -> AsyncIterator[Broker]:
    node = Node(BrokerConfig.from_properties({
        "log.dirs": str(data_dir), "listeners": "PLAINTEXT://127.0.0.1:0",
        "transaction.state.log.num.partitions": "3", "offsets.topic.num.partitions": "3",
        "transactional.id.expiration.ms": "100000"}), clock=clock)
    await node.start()
    broker = node.broker
    assert broker is not None
    try:
        if broker.topics.metadata.get(TOPIC) is None:
            await broker.topics.create(TOPIC, 1)
        # As a client's FindCoordinator and InitProducerId would: __transaction_state exists
        # and a producer-id block is at hand.
        assert (await broker.transactions.find_coordinator("probe"))[0] == ErrorCode.none
        await broker.producer_ids.ready()
        every = set(range(broker.transactions.state.partitions))
        while not (broker.transactions.loaded() and broker.transactions.state.loaded == every):
            await asyncio.sleep(0.01)
        yield broker
    finally:
        await node.stop()


def wall_clock() -> ManualClock:
    """A manual clock starting now (record timestamps are checked against it)."""
    return ManualClock(int(time.time() * 1000))


def in_loop(test: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """Run an async test on a fresh event loop (the broker lives on it)."""
    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> None:
        asyncio.run(test(*args, **kwargs))

    return run


def error_of(call) -> ErrorCode:  # type: ignore[no-untyped-def]
    with pytest.raises(KafkaError) as e:
        call()
    return e.value.code


def lso(broker: Broker) -> int:
    return broker.replicas.log(TOPIC, 0).last_stable_offset


def open_transaction(coordinator: TransactionCoordinator, broker: Broker) -> tuple[int, int]:
    pid, epoch = coordinator.init_producer_id(TID, 1000, None)
    coordinator.add_partitions(TID, pid, epoch, [(TOPIC, 0)])
    broker.replicas.append(TOPIC, 0, raw_batch([b"x"], producer_id=pid, epoch=epoch,
                                               sequence=0, transactional=True))
    return pid, epoch


@in_loop
async def test_init_bumps_the_epoch_and_kip360_retries_are_answered(tmp_path: Path) -> None:
    async with running(tmp_path, wall_clock()) as broker:
        c = broker.transactions
        pid, epoch = c.init_producer_id(TID, 1000, None)
        assert epoch == 0
        assert c.init_producer_id(TID, 1000, None) == (pid, 1)  # a new instance fences
        bumped = c.init_producer_id(TID, 1000, ProducerIdAndEpoch(pid, 1))
        assert bumped == (pid, 2)
        assert c.init_producer_id(TID, 1000, ProducerIdAndEpoch(pid, 1)) == (pid, 2)  # retry
        assert error_of(lambda: c.init_producer_id(TID, 1000, ProducerIdAndEpoch(pid, 0))) \
            == ErrorCode.producer_fenced
        assert error_of(lambda: c.init_producer_id(TID, 1000, ProducerIdAndEpoch(pid + 7, 2))) \
            == ErrorCode.producer_fenced


@in_loop
async def test_an_exhausted_epoch_gets_a_new_producer_id(tmp_path: Path) -> None:
    async with running(tmp_path, wall_clock()) as broker:
        c = broker.transactions
        pid, _ = c.init_producer_id(TID, 1000, None)
        c.state.write(c.transactions[TID].bump_epoch(0, 1000, 32766, 32765))
        new_pid, epoch = c.init_producer_id(TID, 1000, ProducerIdAndEpoch(pid, 32766))
        assert new_pid != pid and epoch == 0
        # the answer was lost: the retry with the old id gets the same new one
        assert c.init_producer_id(TID, 1000, ProducerIdAndEpoch(pid, 32766)) == (new_pid, 0)


@in_loop
async def test_init_aborts_an_open_transaction_of_the_old_producer(tmp_path: Path) -> None:
    async with running(tmp_path, wall_clock()) as broker:
        c = broker.transactions
        pid, epoch = open_transaction(c, broker)
        assert lso(broker) == 0
        assert c.init_producer_id(TID, 1000, None) == (pid, epoch + 2)
        assert c.transactions[TID].state == TxnState.EMPTY
        assert lso(broker) == broker.replicas.log(TOPIC, 0).log_end_offset == 2
        assert [t.producer_id for t in broker.replicas.log(TOPIC, 0)
                .aborted_transactions(0, 2)] == [pid]


@in_loop
async def test_timed_out_transactions_are_aborted_and_the_producer_fenced(tmp_path: Path
                                                                          ) -> None:
    clock = wall_clock()
    async with running(tmp_path, clock) as broker:
        c = broker.transactions
        pid, epoch = open_transaction(c, broker)
        clock.advance(999)
        c.abort_timed_out_transactions()
        assert c.transactions[TID].state == TxnState.ONGOING
        clock.advance(2)
        c.abort_timed_out_transactions()
        assert c.transactions[TID].state == TxnState.COMPLETE_ABORT
        assert c.transactions[TID].producer_epoch == epoch + 1
        assert lso(broker) == 2
        assert error_of(lambda: c.end_transaction(TID, pid, epoch, True)) == \
            ErrorCode.producer_fenced


@in_loop
async def test_end_transaction_rules(tmp_path: Path) -> None:
    async with running(tmp_path, wall_clock()) as broker:
        c = broker.transactions
        pid, epoch = c.init_producer_id(TID, 1000, None)
        assert error_of(lambda: c.end_transaction(TID, pid, epoch, True)) == \
            ErrorCode.invalid_txn_state  # nothing open
        assert error_of(lambda: c.end_transaction(TID, pid + 1, epoch, True)) == \
            ErrorCode.invalid_producer_id_mapping
        assert error_of(lambda: c.end_transaction("", pid, epoch, True)) == \
            ErrorCode.invalid_request
        c.add_partitions(TID, pid, epoch, [(TOPIC, 0)])
        c.end_transaction(TID, pid, epoch, False)
        assert c.transactions[TID].state == TxnState.COMPLETE_ABORT
        c.end_transaction(TID, pid, epoch, False)  # a retry: NONE
        assert error_of(lambda: c.add_partitions(TID, pid, epoch - 1, [(TOPIC, 0)])) == \
            ErrorCode.producer_fenced


@in_loop
async def test_prepared_transactions_are_finished_after_a_restart(tmp_path: Path) -> None:
    clock = wall_clock()
    async with running(tmp_path, clock) as broker:
        c = broker.transactions
        _, epoch = open_transaction(c, broker)
        # the coordinator decided to commit, then stopped before writing any marker
        c.state.write(c.transactions[TID].prepare_end(clock.now_ms(), True, epoch))
        assert lso(broker) == 0
    async with running(tmp_path, clock) as broker:
        assert broker.transactions.transactions[TID].state == TxnState.COMPLETE_COMMIT
        assert lso(broker) == 2
        assert broker.replicas.log(TOPIC, 0).aborted_transactions(0, 2) == []


@in_loop
async def test_state_survives_a_restart_and_idle_ids_expire(tmp_path: Path) -> None:
    clock = wall_clock()
    async with running(tmp_path, clock) as broker:
        pid, _ = broker.transactions.init_producer_id(TID, 1000, None)
    async with running(tmp_path, clock) as broker:
        c = broker.transactions
        assert (c.transactions[TID].producer_id, c.transactions[TID].producer_epoch) == (pid, 0)
        clock.advance(100_000)
        c.expire_transactional_ids()
        assert TID not in c.transactions
    async with running(tmp_path, clock) as broker:
        assert TID not in broker.transactions.transactions  # the tombstone was replayed


def test_log_value_round_trip_and_key() -> None:
    value = TransactionLogValue(5, 3, 60000, int(TxnState.ONGOING),
                                {"a": (0, 2), "b": (1,)}, 1234, 1200)
    assert decode_value(encode_value(value)) == value
    assert decode_key(encode_key("ü-id")) == "ü-id"


def test_flexible_v1_values_are_read() -> None:
    def compact(text: str) -> bytes:
        return bytes([len(text) + 1]) + text.encode()

    body = struct.pack(">hqhib", 1, 9, 2, 30000, int(TxnState.PREPARE_ABORT))
    body += bytes([2]) + compact("t") + bytes([3]) + struct.pack(">ii", 4, 5) + b"\x00"
    body += struct.pack(">qq", 99, 98)
    body += b"\x01" + b"\x00" + b"\x08" + struct.pack(">q", 7)  # tag 0: previous producer id
    assert decode_value(body) == TransactionLogValue(
        9, 2, 30000, int(TxnState.PREPARE_ABORT), {"t": (4, 5)}, 99, 98)


def test_state_table_allows_only_kafkas_transitions() -> None:
    metadata = TransactionMetadata(TID, 1, 0, 1000)
    with pytest.raises(IllegalTransitionError):
        metadata.transition(TxnState.PREPARE_COMMIT, 0)
    assert VALID_PREVIOUS[TxnState.COMPLETE_ABORT] == {TxnState.PREPARE_ABORT}
    assert TxnState.PREPARE_EPOCH_FENCE.display_name == "PrepareEpochFence"
    assert TxnState.from_display_name("CompleteCommit") is TxnState.COMPLETE_COMMIT


@in_loop
async def test_markers_that_cannot_be_written_are_retried_meanwhile_concurrent(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from spark_log.broker.transaction import transaction_coordinator as module

    async with running(tmp_path, wall_clock()) as broker:
        c = broker.transactions
        pid, epoch = open_transaction(c, broker)
        real = module.write_markers
        monkeypatch.setattr(module, "write_markers",
                            lambda b, partitions, *a: (set(partitions), {}))  # all fail
        c.end_transaction(TID, pid, epoch, True)  # the decision is durable: NONE
        assert c.transactions[TID].state == TxnState.PREPARE_COMMIT
        assert error_of(lambda: c.end_transaction(TID, pid, epoch, True)) == \
            ErrorCode.concurrent_transactions
        assert error_of(lambda: c.add_partitions(TID, pid, epoch, [(TOPIC, 0)])) == \
            ErrorCode.concurrent_transactions
        assert error_of(lambda: c.init_producer_id(TID, 1000, None)) == \
            ErrorCode.concurrent_transactions
        assert lso(broker) == 0
        monkeypatch.setattr(module, "write_markers", real)
        c.abort_timed_out_transactions()  # the periodic task retries
        assert c.transactions[TID].state == TxnState.COMPLETE_COMMIT
        assert lso(broker) == 2
