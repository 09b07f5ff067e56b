"""AlterPartition decided by the controller: a leader shrinks and expands its ISR (the record,
and the answer with the new partition epoch), and every refusal Kafka gives, in its order."""

from __future__ import annotations

from typing import Any

import pytest

from spark_log.controller.alter_partition import alter_partition
from spark_log.metadata.records import PartitionChangeRecord
from spark_log.protocol import ErrorCode

from .control_fixtures import apply, broker, image_of, records_of, request, topic, topic_id

T = topic_id("t")


def image(**brokers: Any):  # type: ignore[no-untyped-def]
    return image_of(broker(1), broker(2, **brokers), broker(3),
                    topic("t", [[1, 2, 3]], isr=[[1, 2]]))


def ask(img, isr: list[int], *, asker: int = 1, leader_epoch: int = 0,  # type: ignore[no-untyped-def]
        partition_epoch: int = 0, recovery: int = 0, broker_epoch: int | None = None,
        epochs: dict[int, int] | None = None, version: int = 3, tid=T, partition: int = 0):
    members = [{"broker_id": b, "broker_epoch": (epochs or {}).get(b, 100 + b)} for b in isr]
    data = {"partition_index": partition, "leader_epoch": leader_epoch,
            "leader_recovery_state": recovery, "partition_epoch": partition_epoch}
    data.update({"new_isr_with_epochs": members} if version >= 3 else {"new_isr": isr})
    req = request(56, version, broker_id=asker,
                  broker_epoch=100 + asker if broker_epoch is None else broker_epoch,
                  topics=[{"topic_id": tid, "partitions": [data]}])
    return alter_partition(img, req)


def answer(result) -> Any:  # type: ignore[no-untyped-def]
    (topic_data,) = result.response.topics
    (partition,) = topic_data.partitions
    return partition


def test_the_leader_expands_and_shrinks_its_isr() -> None:
    img = image()
    grown = ask(img, [1, 2, 3])
    (record,) = records_of(grown, PartitionChangeRecord)
    assert record.isr == (1, 2, 3) and record.leader == -2  # the leader does not change
    done = answer(grown)
    assert (done.error_code, done.isr, done.partition_epoch, done.leader_epoch,
            done.leader_id) == (ErrorCode.none, (1, 2, 3), 1, 0, 1)
    img = apply(img, grown)
    assert img.partition("t", 0).isr == (1, 2, 3)
    shrunk = ask(img, [1, 3], partition_epoch=1, version=2)
    assert answer(shrunk).isr == (1, 3) and answer(shrunk).partition_epoch == 2
    same = ask(img, [1, 2, 3], partition_epoch=1)  # nothing to change: the current state
    assert same.records == () and answer(same).partition_epoch == 1


@pytest.mark.parametrize(("kw", "isr", "error"), [
    ({"leader_epoch": 1}, [1, 2], ErrorCode.not_controller),
    ({"partition_epoch": 1}, [1, 2], ErrorCode.not_controller),
    ({"asker": 2}, [1, 2], ErrorCode.invalid_request),
    ({}, [1, 1], ErrorCode.invalid_request),
    ({}, [1, 4], ErrorCode.invalid_request),
    ({}, [2, 3], ErrorCode.invalid_request),  # leaves out the leader
    ({"recovery": 1}, [1, 2], ErrorCode.invalid_request),  # RECOVERED cannot go back
    ({"epochs": {3: 7}}, [1, 2, 3], ErrorCode.ineligible_replica),  # a stale broker epoch
    ({"partition": 5}, [1], ErrorCode.unknown_topic_or_partition),
])
def test_refusals(kw: dict[str, Any], isr: list[int], error: ErrorCode) -> None:
    result = ask(image(), isr, **kw)
    assert answer(result).error_code == error and result.records == ()


def test_stale_leader_epochs_and_partition_epochs() -> None:
    img = apply(image(), ask(image(), [1, 2, 3]))  # partition epoch 1 now
    assert answer(ask(img, [1, 2], partition_epoch=0)).error_code == \
        ErrorCode.invalid_update_version
    re_elected = image_of(broker(1), broker(2), broker(3), topic("t", [[1, 2, 3]], isr=[[1, 2]]),
                          PartitionChangeRecord(topic_id=T, partition_id=0, leader=1))
    assert re_elected.partition("t", 0).leader_epoch == 1
    fenced = ask(re_elected, [1, 2, 3], leader_epoch=0, partition_epoch=1)
    assert answer(fenced).error_code == ErrorCode.fenced_leader_epoch


@pytest.mark.parametrize("brokers", [{"fenced": True}, {"in_controlled_shutdown": True}])
def test_a_fenced_or_leaving_broker_cannot_join(brokers: dict[str, bool]) -> None:
    img = image_of(broker(1), broker(2, **brokers), broker(3),
                   topic("t", [[1, 2, 3]], isr=[[1, 3]]))
    assert answer(ask(img, [1, 2, 3])).error_code == ErrorCode.ineligible_replica


def test_a_stale_asker_or_an_unknown_topic() -> None:
    stale = ask(image(), [1, 2], broker_epoch=5)
    assert stale.response.error_code == ErrorCode.stale_broker_epoch and stale.records == ()
    unknown = ask(image(), [1, 2], tid=topic_id("gone"))
    assert answer(unknown).error_code == ErrorCode.unknown_topic_id
