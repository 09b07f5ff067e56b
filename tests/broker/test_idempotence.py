"""Idempotent produce against the real broker process: librdkafka through a proxy that cuts
connections, and raw requests for duplicates, gaps, stale epochs and crash recovery."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import Producer

from spark_log.protocol import ErrorCode
from spark_log.protocol.api_keys import ApiKey
from tests.broker.chaos_proxy import ChaosProxy
from tests.broker.raw_client import RawClient
from tests.broker.txn_support import (
    TXN_BROKER_CONFIG,
    create_topic,
    list_offset,
    raw_batch,
    raw_produce,
    read_values,
    unique,
)
from tests.broker_process import BrokerProcess
from tests.cluster_process import free_ports

MESSAGES = 8_000


def _idempotent_producer_id(client: RawClient) -> tuple[int, int]:
    response = client.request(ApiKey.INIT_PRODUCER_ID, 4, {
        "transactional_id": None, "transaction_timeout": 60000, "producer_id": -1,
        "producer_epoch": -1})
    assert response.error_code == ErrorCode.none
    return response.producer_id, response.producer_epoch


def test_idempotent_producer_writes_exactly_once_through_cut_connections(tmp_path: Path
                                                                         ) -> None:
    proxy = ChaosProxy(min_bytes=1_000, max_bytes=16_000, response_bytes=(100, 3_000))
    port = free_ports(1)[0]
    broker = BrokerProcess(tmp_path / "data", tmp_path / "broker.log", {
        **TXN_BROKER_CONFIG, "advertised.listeners": f"PLAINTEXT://{proxy.address}"},
        port=port).start()
    proxy.start(("127.0.0.1", port))
    try:
        topic = unique("idem")
        create_topic(proxy.address, topic)
        failures: list[object] = []
        producer = Producer({
            "bootstrap.servers": proxy.address, "enable.idempotence": True,
            "linger.ms": 2, "batch.num.messages": 100, "retry.backoff.ms": 10,
            "reconnect.backoff.ms": 10, "reconnect.backoff.max.ms": 100,
            "message.timeout.ms": 120_000, "log_level": 0})
        for i in range(MESSAGES):
            producer.produce(topic, value=b"%d" % i,
                             on_delivery=lambda err, _m: err and failures.append(err))
            producer.poll(0)
        assert producer.flush(120) == 0
        assert failures == []
        assert proxy.cuts >= 10, "the proxy should have cut connections mid-produce"
        proxy.min_bytes = proxy.max_bytes = 10**12  # read back without cuts
        proxy.response_bytes = (10**12, 10**12)
        values = read_values(proxy.address, topic, expect=MESSAGES, idle_s=1)
        assert values == [b"%d" % i for i in range(MESSAGES)]
    finally:
        proxy.close()
        broker.stop()


def test_duplicates_get_their_original_offsets_and_gaps_are_refused(shared_broker) -> None:  # type: ignore
    topic = unique("dup")
    create_topic(shared_broker.bootstrap, topic)
    with RawClient(shared_broker.bootstrap) as client:
        pid, epoch = _idempotent_producer_id(client)
        first = raw_batch([b"a", b"b", b"c"], producer_id=pid, epoch=epoch, sequence=0)
        second = raw_batch([b"d"], producer_id=pid, epoch=epoch, sequence=3)
        assert raw_produce(client, topic, first).base_offset == 0
        assert raw_produce(client, topic, second).base_offset == 3
        retry = raw_produce(client, topic, first)
        assert (retry.error_code, retry.base_offset) == (ErrorCode.none, 0)
        assert list_offset(client, topic, committed=False) == 4  # nothing written twice
        gap = raw_produce(client, topic, raw_batch([b"x"], producer_id=pid, epoch=epoch,
                                                   sequence=9))
        assert gap.error_code == ErrorCode.out_of_order_sequence_number
        newer = raw_batch([b"e"], producer_id=pid, epoch=epoch + 1, sequence=0)
        assert raw_produce(client, topic, newer).error_code == ErrorCode.none
        stale = raw_produce(client, topic, raw_batch([b"z"], producer_id=pid, epoch=epoch,
                                                     sequence=4))
        assert stale.error_code == ErrorCode.invalid_producer_epoch
    assert read_values(shared_broker.bootstrap, topic, expect=5, idle_s=0.5) == \
        [b"a", b"b", b"c", b"d", b"e"]


def test_producer_state_survives_a_broker_crash(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", tmp_path / "broker.log", TXN_BROKER_CONFIG).start()
    try:
        topic = unique("crash")
        create_topic(broker.bootstrap, topic)
        with RawClient(broker.bootstrap) as client:
            pid, epoch = _idempotent_producer_id(client)
            batches = [raw_batch([b"%d" % i], producer_id=pid, epoch=epoch, sequence=i)
                       for i in range(4)]
            for i, batch in enumerate(batches):
                assert raw_produce(client, topic, batch).base_offset == i
        broker.kill()
        broker.start()
        with RawClient(broker.bootstrap) as client:
            retry = raw_produce(client, topic, batches[-1])  # its answer was "lost"
            assert (retry.error_code, retry.base_offset) == (ErrorCode.none, 3)
            following = raw_batch([b"4"], producer_id=pid, epoch=epoch, sequence=4)
            assert raw_produce(client, topic, following).base_offset == 4
            gap = raw_batch([b"9"], producer_id=pid, epoch=epoch, sequence=9)
            assert raw_produce(client, topic, gap).error_code == \
                ErrorCode.out_of_order_sequence_number
    finally:
        broker.stop()
