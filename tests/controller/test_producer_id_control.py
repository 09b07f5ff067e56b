"""AllocateProducerIds as Kafka's ProducerIdControlManager answers it: blocks of 1000 ids, each
starting where the last ended, stale broker epochs refused."""

from __future__ import annotations

from spark_log.controller.producer_id_control import PRODUCER_ID_BLOCK_SIZE, allocate_producer_ids
from spark_log.metadata.records import ProducerIdsRecord
from spark_log.protocol import ErrorCode

from .control_fixtures import apply, broker, image_of, request


def allocate(image, broker_id: int, epoch: int):  # type: ignore[no-untyped-def]
    return allocate_producer_ids(image, request(67, 0, broker_id=broker_id, broker_epoch=epoch))


def test_blocks_follow_one_another() -> None:
    image = image_of(broker(1, epoch=10), broker(2, epoch=20))
    first = allocate(image, 1, 10)
    assert (first.response.error_code, first.response.producer_id_start,
            first.response.producer_id_len) == (ErrorCode.none, 0, PRODUCER_ID_BLOCK_SIZE)
    assert first.records == (ProducerIdsRecord(broker_id=1, broker_epoch=10,
                                                next_producer_id=1000),)
    image = apply(image, first)
    second = allocate(image, 2, 20)
    assert second.response.producer_id_start == 1000
    assert apply(image, second).next_producer_id == 2000


def test_unknown_brokers_and_stale_epochs_are_refused() -> None:
    image = image_of(broker(1, epoch=10))
    for broker_id, epoch in ((1, 9), (2, 10)):
        result = allocate(image, broker_id, epoch)
        assert result.response.error_code == ErrorCode.stale_broker_epoch
        assert result.records == ()


def test_exhausted_ids_are_an_error() -> None:
    image = image_of(broker(1, epoch=10),
                     ProducerIdsRecord(broker_id=1, broker_epoch=10,
                                       next_producer_id=2**63 - 1000))
    result = allocate(image, 1, 10)
    assert result.response.error_code == ErrorCode.unknown_server_error and not result.records
