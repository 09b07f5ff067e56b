"""The direct read path outside Spark: the hand-read Fetch response, ranges that take many
fetches (each sent while the previous answer is decoded), and fetchers kept between tasks."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pyarrow as pa
import pytest

from spark_log.client import fetcher as fetcher_module
from spark_log.client.fetcher import FetchUnavailable, PartitionFetcher, read_fetch_response
from spark_log.datasource import direct_read, range_reader
from spark_log.datasource.arrow import BatchBuilder, spark_schema
from spark_log.datasource.range_reader import RangePartition, read_range
from spark_log.protocol import decode_response, encode_response, spec_for
from spark_log.protocol.api_keys import ApiKey
from spark_log.protocol.entity_build import build
from spark_log.records import Record, build_batch
from tests.broker_process import BrokerProcess
from tests.datasource.conftest import create_topic, produce, unique


def _fetch_response(partitions: list[dict]) -> bytes:
    spec = spec_for(ApiKey.FETCH)
    assert spec is not None
    response = build(spec.response_type(4), {"throttle_time": dt.timedelta(0), "responses": [
        {"topic": "other", "partitions": [{"partition_index": 0, "error_code": 0,
                                           "high_watermark": 1, "last_stable_offset": 1,
                                           "aborted_transactions": None, "records": b"zz"}]},
        {"topic": "t", "partitions": partitions}]})
    return encode_response(7, response)[4:]  # as the fetcher receives it: after the size


def _part(index: int, records: bytes | None, error: int = 0,
          aborted: list[dict] | None = None) -> dict:
    return {"partition_index": index, "error_code": error, "high_watermark": 40 + index,
            "last_stable_offset": 30 + index, "aborted_transactions": aborted,
            "records": records}


def test_the_hand_read_fetch_response_agrees_with_the_codec() -> None:
    batch = build_batch([Record(5, 1, b"k", b"v", ())], base_offset=5)
    frame = _fetch_response([_part(0, b"other"), _part(1, batch, aborted=[
        {"producer_id": 3, "first_offset": 5}]), _part(2, None)])
    _, decoded = decode_response(frame, ApiKey.FETCH, 4)
    body = memoryview(frame)[4:]
    got = read_fetch_response(body, "t", 1)
    expected = decoded.responses[1].partitions[1]
    assert bytes(got.records) == bytes(expected.records) == batch
    assert (got.high_watermark, got.last_stable_offset) == (41, 31)
    assert got.has_aborted
    empty = read_fetch_response(body, "t", 2)
    assert bytes(empty.records) == b"" and not empty.has_aborted
    with pytest.raises(FetchUnavailable, match="missing"):
        read_fetch_response(body, "t", 9)
    errors = memoryview(_fetch_response([_part(0, None, error=6)]))[4:]
    with pytest.raises(FetchUnavailable, match="fetch error 6"):
        read_fetch_response(errors, "t", 0)


def _offsets(batches: Iterator[pa.RecordBatch]) -> list[int]:
    return [o for b in batches for o in b.column("offset").to_pylist()]


def _range(broker: BrokerProcess, topic: str, start: int, end: int) -> RangePartition:
    return RangePartition(topic, 0, start, end, broker.bootstrap)


def _builder() -> BatchBuilder:
    return BatchBuilder(spark_schema(), False)


def _produce_batches(broker: BrokerProcess, topic: str, batches: int, size: int) -> None:
    """`batches` record batches of `size` records (each produce call flushes)."""
    for b in range(batches):
        produce(broker, topic, [b"v%d" % (b * size + i) for i in range(size)])


@pytest.fixture
def direct_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if a read leaves the direct path; start without kept fetchers."""
    def no_consumer(*args: object) -> Iterator[pa.RecordBatch]:
        raise AssertionError("the direct path handed over to the consumer")

    monkeypatch.setattr(range_reader, "_read_with_consumer", no_consumer)
    for fetcher in direct_read._kept.values():
        fetcher.close()
    direct_read._kept.clear()


def test_a_range_of_many_fetches_reads_each_record_once(shared_broker: BrokerProcess,
                                                        direct_only: None,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    topic = create_topic(shared_broker, unique("fetches"))
    _produce_batches(shared_broker, topic, 10, 300)
    monkeypatch.setattr(direct_read, "FETCH_BYTES", 2000)  # a batch or two per fetch
    sent: list[int] = []  # the offsets fetched
    send = PartitionFetcher.send_fetch

    def counting(self: PartitionFetcher, *args: int) -> None:
        send(self, *args)
        sent.append(args[0])

    monkeypatch.setattr(PartitionFetcher, "send_fetch", counting)
    assert _offsets(read_range(_range(shared_broker, topic, 0, 3000), _builder())) == \
        list(range(3000))
    assert len(sent) >= 5 and sent == sorted(set(sent))  # many fetches, none repeated
    assert _offsets(read_range(_range(shared_broker, topic, 123, 2777), _builder())) == \
        list(range(123, 2777))


def test_a_fetcher_is_kept_for_the_next_task_and_replaced_once_its_connection_died(
        shared_broker: BrokerProcess, direct_only: None) -> None:
    topic = create_topic(shared_broker, unique("kept"))
    produce(shared_broker, topic, [b"v%d" % i for i in range(10)])
    key = (shared_broker.bootstrap, topic, 0, True)
    assert _offsets(read_range(_range(shared_broker, topic, 0, 4), _builder())) == [0, 1, 2, 3]
    kept = direct_read._kept[key]
    assert _offsets(read_range(_range(shared_broker, topic, 4, 6), _builder())) == [4, 5]
    assert direct_read._kept[key] is kept  # the same connection served the second task
    kept._conn.sock.close()  # as when the broker closes an idle connection
    assert _offsets(read_range(_range(shared_broker, topic, 6, 10), _builder())) == \
        [6, 7, 8, 9]
    assert direct_read._kept[key] is not kept


def test_a_read_stopped_with_a_fetch_in_flight_does_not_keep_its_fetcher(
        shared_broker: BrokerProcess, direct_only: None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    topic = create_topic(shared_broker, unique("stopped"))
    _produce_batches(shared_broker, topic, 10, 300)
    monkeypatch.setattr(direct_read, "FETCH_BYTES", 2000)
    batches = read_range(_range(shared_broker, topic, 0, 3000), _builder())
    first = next(batches)
    assert first.column("offset")[0].as_py() == 0
    batches.close()  # Spark stops reading (a limit was reached)
    assert (shared_broker.bootstrap, topic, 0, True) not in direct_read._kept


def test_a_task_starts_with_a_small_fetch_and_hands_spark_batches_of_bounded_rows(
        shared_broker: BrokerProcess, direct_only: None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    topic = create_topic(shared_broker, unique("bounded"))
    _produce_batches(shared_broker, topic, 10, 300)
    monkeypatch.setattr(direct_read, "FIRST_FETCH_BYTES", 2000)  # a batch or two
    monkeypatch.setattr(direct_read, "FETCH_BYTES", 1 << 20)  # the rest at once
    monkeypatch.setattr(direct_read, "BATCH_ROWS", 128)
    sizes: list[int] = []  # max_bytes of each fetch sent
    send = PartitionFetcher.send_fetch

    def recording(self: PartitionFetcher, offset: int, max_bytes: int, *args: int) -> None:
        send(self, offset, max_bytes, *args)
        sizes.append(max_bytes)

    monkeypatch.setattr(PartitionFetcher, "send_fetch", recording)
    batches = list(read_range(_range(shared_broker, topic, 0, 3000), _builder()))
    assert _offsets(iter(batches)) == list(range(3000))
    assert sizes[0] == 2000 and set(sizes[1:]) == {1 << 20}
    rows = [b.num_rows for b in batches]
    assert max(rows) == 128 and len(rows) >= 3000 // 128


def test_answers_of_megabytes_are_received_into_unfilled_arrays_and_read_whole(
        shared_broker: BrokerProcess, direct_only: None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    topic = create_topic(shared_broker, unique("large"))
    values = [b"%07d" % i + bytes([i % 251]) * 993 for i in range(3000)]  # ~3 MB
    produce(shared_broker, topic, values)
    monkeypatch.setattr(direct_read, "FIRST_FETCH_BYTES", 4 << 20)
    frames: list[tuple[int, str]] = []
    allocate = fetcher_module._frame_buffer

    def recording(size: int):  # type: ignore[no-untyped-def]
        buf = allocate(size)
        frames.append((size, type(buf).__name__))
        return buf

    monkeypatch.setattr(fetcher_module, "_frame_buffer", recording)
    batches = list(read_range(_range(shared_broker, topic, 0, 3000), _builder()))
    assert [v for b in batches for v in b.column("value").to_pylist()] == values
    assert any(size >= fetcher_module._LARGE_FRAME and kind == "ndarray"
               for size, kind in frames), frames
    assert all(kind == "bytearray" for size, kind in frames if size < fetcher_module._LARGE_FRAME)
