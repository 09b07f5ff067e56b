"""Broker registration and liveness as Kafka's ClusterControlManager and BrokerHeartbeatManager
decide them: registrations (cluster id, duplicate incarnations, re-registration, features, the
epoch at the record's offset), heartbeats (stale epochs, unfencing once caught up, fencing on
request, controlled shutdown until the broker leads nothing), session expiry, unregistration."""

from __future__ import annotations

import dataclasses

import pytest

from spark_log.controller.broker_heartbeats import BrokerHeartbeats
from spark_log.controller.cluster_control import (
    broker_heartbeat,
    fence_stale_broker,
    register_broker,
    unregister_broker,
)
from spark_log.metadata import NO_LEADER_CHANGE
from spark_log.metadata.records import (
    BrokerFeature,
    BrokerRegistrationChangeRecord,
    FeatureLevelRecord,
    PartitionChangeRecord,
    RegisterBrokerRecord,
    UnregisterBrokerRecord,
)
from spark_log.protocol import ErrorCode

from .control_fixtures import (
    CLUSTER_ID,
    MV,
    SETTINGS,
    apply,
    broker,
    image_of,
    incarnation,
    request,
    topic,
    topic_config,
    topic_id,
)

TIMEOUT = SETTINGS.broker_session_timeout_ms


def registration(broker_id: int, *, version: int = 4, generation: int = 0,
                 cluster_id: str = CLUSTER_ID, features: list[tuple[str, int, int]] | None = None,
                 rack: str | None = None, **extra: object) -> object:
    feature_list = [("metadata.version", 1, MV)] if features is None else features
    return request(62, version, broker_id=broker_id, cluster_id=cluster_id,
                   incarnation_id=incarnation(broker_id, generation),
                   listeners=[{"name": "PLAINTEXT", "host": f"h{broker_id}", "port": 9092,
                               "security_protocol": 0}],
                   features=[{"name": n, "min_supported_version": lo,
                              "max_supported_version": hi} for n, lo, hi in feature_list],
                   rack=rack, **extra)


def heartbeat(broker_id: int, epoch: int, offset: int, *, want_fence: bool = False,
              want_shut_down: bool = False, version: int = 2) -> object:
    return request(63, version, broker_id=broker_id, broker_epoch=epoch,
                   current_metadata_offset=offset, want_fence=want_fence,
                   want_shut_down=want_shut_down)


def live(image, now: int = 0) -> BrokerHeartbeats:  # type: ignore[no-untyped-def]
    heartbeats = BrokerHeartbeats(TIMEOUT)
    heartbeats.activate(image, now)
    return heartbeats


# ---- registration ---------------------------------------------------------------------------

@pytest.mark.parametrize("version", range(5))
def test_a_new_broker_is_registered_fenced_with_the_offset_of_its_record_as_epoch(
        version: int) -> None:
    image = image_of()
    result = register_broker(image, registration(1, version=version, rack="r1"),
                             BrokerHeartbeats(TIMEOUT), settings=SETTINGS, now_ms=0,
                             next_offset=42)
    assert result.response.error_code == ErrorCode.none
    assert result.response.broker_epoch == 42
    (record,) = result.records
    assert record == RegisterBrokerRecord(
        broker_id=1, incarnation_id=incarnation(1), broker_epoch=42, rack="r1", fenced=True,
        end_points=record.end_points,
        features=(BrokerFeature(name="metadata.version", min_supported_version=1,
                                max_supported_version=MV),))
    assert record.end_points[0].host == "h1"
    assert apply(image, result).broker(1).fenced


def test_another_cluster_is_refused() -> None:
    result = register_broker(image_of(), registration(1, cluster_id="other"),
                             BrokerHeartbeats(TIMEOUT), settings=SETTINGS, now_ms=0,
                             next_offset=5)
    assert result.records == ()
    assert result.response.error_code == ErrorCode.inconsistent_cluster_id
    assert result.response.broker_epoch == -1


def test_a_broker_id_held_by_a_live_incarnation_is_refused() -> None:
    image = image_of(broker(1))
    result = register_broker(image, registration(1, generation=1), live(image, 0),
                             settings=SETTINGS, now_ms=TIMEOUT, next_offset=9)
    assert result.response.error_code == ErrorCode.duplicate_broker_registration
    assert result.records == ()


def test_the_broker_of_the_controllers_own_process_replaces_its_live_predecessor_at_once(
        ) -> None:
    # A combined node restarted after SIGKILL: its earlier incarnation's session still runs
    # on the new controller, but that incarnation's process is gone.
    image = image_of(broker(1), broker(2), topic("t", [[1, 2]]))
    own = dataclasses.replace(SETTINGS, node_id=1, local_broker_incarnation=incarnation(1, 1))
    result = register_broker(image, registration(1, generation=1), live(image, 0),
                             settings=own, now_ms=1, next_offset=60)
    assert result.response.error_code == ErrorCode.none
    assert result.response.broker_epoch == 60
    after = apply(image, result)
    assert after.broker(1).fenced and after.broker(1).incarnation_id == incarnation(1, 1)
    assert after.partition("t", 0).leader == 2  # its leaderships moved off, as on expiry


@pytest.mark.parametrize("node_id, generation", [(1, 2), (2, 1)])
def test_only_that_broker_skips_the_wait(node_id: int, generation: int) -> None:
    # Another incarnation than the process's own, or the own incarnation id under a node id
    # that is not the controller's, is a second live broker: refused.
    image = image_of(broker(1))
    own = dataclasses.replace(SETTINGS, node_id=node_id,
                              local_broker_incarnation=incarnation(1, generation))
    result = register_broker(image, registration(1, generation=1), live(image, 0),
                             settings=own, now_ms=1, next_offset=9)
    assert result.response.error_code == ErrorCode.duplicate_broker_registration


def test_a_new_incarnation_replaces_one_whose_session_expired_and_takes_its_leaderships(
        ) -> None:
    image = image_of(broker(1), broker(2), topic("t", [[1, 2], [2, 1]]))
    result = register_broker(image, registration(1, generation=1), live(image, 0),
                             settings=SETTINGS, now_ms=TIMEOUT + 1, next_offset=50)
    assert result.response.error_code == ErrorCode.none
    assert result.response.broker_epoch == 50
    register, *moves = result.records
    assert isinstance(register, RegisterBrokerRecord) and register.broker_epoch == 50
    assert register.fenced
    after = apply(image, result)
    assert after.partition("t", 0).leader == 2 and after.partition("t", 0).isr == (2,)
    assert after.partition("t", 1).isr == (2,)
    assert len(moves) == 2


def test_a_new_incarnation_replaces_a_fenced_one() -> None:
    image = image_of(broker(1, fenced=True))
    result = register_broker(image, registration(1, generation=1), live(image, 0),
                             settings=SETTINGS, now_ms=1, next_offset=7)
    assert result.response.error_code == ErrorCode.none
    assert result.records[0].incarnation_id == incarnation(1, 1)


def test_the_same_incarnation_registering_again_keeps_its_epoch_and_state() -> None:
    image = image_of(broker(1, epoch=10, in_controlled_shutdown=True))
    result = register_broker(image, registration(1, rack="r9"), live(image, 0),
                             settings=SETTINGS, now_ms=1, next_offset=99)
    assert result.response.broker_epoch == 10
    (record,) = result.records
    assert (record.broker_epoch, record.fenced, record.in_controlled_shutdown,
            record.rack) == (10, False, True, "r9")


@pytest.mark.parametrize(("features", "finalized"), [
    ([("metadata.version", 1, 7)], []),
    ([], []),
    ([("metadata.version", 1, MV)], [FeatureLevelRecord(name="group.version", feature_level=1)]),
    ([("metadata.version", 1, MV), ("x.version", 1, 2)], []),
])
def test_a_broker_must_support_every_finalized_feature_level(
        features: list[tuple[str, int, int]], finalized: list[object]) -> None:
    result = register_broker(image_of(*finalized), registration(1, features=features),
                             BrokerHeartbeats(TIMEOUT), settings=SETTINGS, now_ms=0,
                             next_offset=3)
    assert result.response.error_code == ErrorCode.unsupported_version
    assert result.records == ()


def test_a_broker_naming_no_metadata_version_is_taken_to_support_the_first_kraft_level(
        ) -> None:
    result = register_broker(image_of(metadata_version=None), registration(1, features=[]),
                             BrokerHeartbeats(TIMEOUT), settings=SETTINGS, now_ms=0,
                             next_offset=3)
    assert result.response.error_code == ErrorCode.none
    assert result.records[0].features == (BrokerFeature(
        name="metadata.version", min_supported_version=1, max_supported_version=1),)


def test_a_migrating_zookeeper_broker_is_refused() -> None:
    result = register_broker(image_of(), registration(1, is_migrating_zk_broker=True),
                             BrokerHeartbeats(TIMEOUT), settings=SETTINGS, now_ms=0,
                             next_offset=3)
    assert result.response.error_code == ErrorCode.broker_id_not_registered


# ---- heartbeats -----------------------------------------------------------------------------

def test_heartbeats_of_unknown_brokers_and_stale_epochs_are_refused() -> None:
    image = image_of(broker(1, epoch=10))
    heartbeats = live(image)
    for hb, offset in ((heartbeat(2, 10, 5), 1), (heartbeat(1, 9, 5), 1),
                       (heartbeat(1, 10, 5), None)):
        result = broker_heartbeat(image, hb, heartbeats, settings=SETTINGS, now_ms=1,
                                  next_offset=20, register_offset=offset)
        assert result.response.error_code == ErrorCode.stale_broker_epoch
        assert result.records == ()


def test_a_fenced_broker_is_unfenced_once_it_reached_its_registration() -> None:
    image = image_of(broker(1, fenced=True, epoch=10), broker(2, fenced=True),
                     topic("t", [[1]], leaders=[-1]))
    heartbeats = live(image)
    behind = broker_heartbeat(image, heartbeat(1, 10, 9), heartbeats, settings=SETTINGS,
                              now_ms=1, next_offset=20, register_offset=10)
    assert behind.records == ()
    assert (behind.response.is_caught_up, behind.response.is_fenced) == (False, True)
    caught_up = broker_heartbeat(image, heartbeat(1, 10, 10), heartbeats, settings=SETTINGS,
                                 now_ms=2, next_offset=20, register_offset=10)
    assert (caught_up.response.is_caught_up, caught_up.response.is_fenced) == (True, False)
    assert caught_up.records[0] == BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10,
                                                                  fenced=-1)
    after = apply(image, caught_up)
    assert not after.broker(1).fenced
    assert after.partition("t", 0).leader == 1  # leaderless partitions may elect it


def test_a_fenced_broker_that_wants_to_stay_fenced_stays_fenced() -> None:
    image = image_of(broker(1, fenced=True, epoch=10))
    result = broker_heartbeat(image, heartbeat(1, 10, 50, want_fence=True), live(image),
                              settings=SETTINGS, now_ms=1, next_offset=60, register_offset=10)
    assert result.records == () and result.response.is_fenced


def test_an_unfenced_broker_asking_to_be_fenced_is_fenced_and_loses_its_leaderships() -> None:
    image = image_of(broker(1, epoch=10), broker(2), topic("t", [[1, 2]]))
    result = broker_heartbeat(image, heartbeat(1, 10, 50, want_fence=True), live(image),
                              settings=SETTINGS, now_ms=1, next_offset=60, register_offset=10)
    assert result.response.is_fenced and not result.response.should_shut_down
    assert isinstance(result.records[0], PartitionChangeRecord)
    assert result.records[-1] == BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10,
                                                                fenced=1)
    after = apply(image, result)
    assert after.broker(1).fenced
    assert (after.partition("t", 0).leader, after.partition("t", 0).isr) == (2, (2,))


def test_controlled_shutdown_moves_leaderships_then_lets_the_broker_stop() -> None:
    image = image_of(broker(1, epoch=10), broker(2, epoch=11), topic("t", [[1, 2], [2, 1]]))
    heartbeats = live(image)
    heartbeats.touch(2, 0, 30, fenced=False)
    first = broker_heartbeat(image, heartbeat(1, 10, 30, want_shut_down=True), heartbeats,
                             settings=SETTINGS, now_ms=1, next_offset=40, register_offset=10)
    assert not first.response.is_fenced and not first.response.should_shut_down
    assert first.records[0] == BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10,
                                                              in_controlled_shutdown=1)
    shutdown_offset = 40 + len(first.records) - 1
    assert heartbeats.contact(1).controlled_shutdown_offset == shutdown_offset
    image = apply(image, first)
    assert image.broker(1).in_controlled_shutdown
    assert all(p.leader == 2 and p.isr == (2,) for p in image.topic("t").partitions.values())
    # broker 2 has not seen the change yet: 1 must wait
    waiting = broker_heartbeat(image, heartbeat(1, 10, 45, want_shut_down=True), heartbeats,
                               settings=SETTINGS, now_ms=2, next_offset=50, register_offset=10)
    assert waiting.records == () and not waiting.response.should_shut_down
    heartbeats.touch(2, 3, shutdown_offset, fenced=False)
    done = broker_heartbeat(image, heartbeat(1, 10, 45, want_shut_down=True), heartbeats,
                            settings=SETTINGS, now_ms=4, next_offset=50, register_offset=10)
    assert done.response.should_shut_down and done.response.is_fenced
    assert done.records == (BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10,
                                                           fenced=1),)


def test_a_broker_leading_nothing_shuts_down_at_once() -> None:
    image = image_of(broker(1, epoch=10), broker(2), topic("t", [[2, 1]]))
    result = broker_heartbeat(image, heartbeat(1, 10, 30, want_shut_down=True), live(image),
                              settings=SETTINGS, now_ms=1, next_offset=40, register_offset=10)
    assert result.response.should_shut_down and result.response.is_fenced
    assert apply(image, result).partition("t", 0).isr == (2,)


def test_a_fenced_broker_asking_to_shut_down_may_at_once() -> None:
    image = image_of(broker(1, fenced=True, epoch=10))
    result = broker_heartbeat(image, heartbeat(1, 10, 0, want_shut_down=True), live(image),
                              settings=SETTINGS, now_ms=1, next_offset=40, register_offset=10)
    assert result.response.should_shut_down and result.records == ()


def test_the_last_isr_member_leaving_leaves_no_leader_unless_unclean_election_is_on() -> None:
    image = image_of(broker(1, epoch=10), broker(2), topic("clean", [[1, 2]], isr=[[1]]),
                     topic("dirty", [[1, 2]], isr=[[1]]),
                     topic_config("dirty", "unclean.leader.election.enable", "true"))
    result = broker_heartbeat(image, heartbeat(1, 10, 30, want_fence=True), live(image),
                              settings=SETTINGS, now_ms=1, next_offset=40, register_offset=10)
    after = apply(image, result)
    assert (after.partition("clean", 0).leader, after.partition("clean", 0).isr) == (-1, (1,))
    assert (after.partition("dirty", 0).leader, after.partition("dirty", 0).isr) == (2, (2,))
    assert [tp.topic for tp in result.unclean_elections] == ["dirty"]


# ---- session expiry and unregistration ------------------------------------------------------

def test_the_broker_whose_session_expired_first_is_fenced_one_at_a_time() -> None:
    image = image_of(broker(1, epoch=10), broker(2, epoch=11), broker(3, fenced=True),
                     topic("t", [[1, 2]]))
    heartbeats = live(image, 0)
    heartbeats.touch(2, 5, 0, fenced=False)
    assert fence_stale_broker(image, heartbeats, settings=SETTINGS,
                              now_ms=TIMEOUT).response is None
    result = fence_stale_broker(image, heartbeats, settings=SETTINGS, now_ms=TIMEOUT + 10)
    assert result.response == 1
    image = apply(image, result)
    assert image.broker(1).fenced and image.partition("t", 0).leader == 2
    assert fence_stale_broker(image, heartbeats, settings=SETTINGS,
                              now_ms=TIMEOUT + 10).response == 2
    assert heartbeats.next_expiry_ms(image) == 5 + TIMEOUT + 1


def test_unregistering_moves_leaderships_then_removes_the_broker() -> None:
    image = image_of(broker(1, epoch=10), broker(2), topic("t", [[1, 2]]))
    heartbeats = live(image)
    result = unregister_broker(image, request(64, 0, broker_id=1), heartbeats,
                               settings=SETTINGS)
    assert result.response.error_code == ErrorCode.none
    assert result.records[-1] == UnregisterBrokerRecord(broker_id=1, broker_epoch=10)
    change = result.records[0]
    assert change == PartitionChangeRecord(topic_id=topic_id("t"), partition_id=0, isr=(2,),
                                           leader=2)
    assert change.leader != NO_LEADER_CHANGE
    assert apply(image, result).broker(1) is None
    assert heartbeats.contact(1) is None
    unknown = unregister_broker(image, request(64, 0, broker_id=9), heartbeats,
                                settings=SETTINGS)
    assert unknown.response.error_code == ErrorCode.broker_id_not_registered


def test_an_unfenced_broker_wanting_both_fence_and_shutdown_stops_at_once() -> None:
    image = image_of(broker(1, epoch=10), broker(2), topic("t", [[1, 2]]))
    result = broker_heartbeat(image, heartbeat(1, 10, 5, want_fence=True, want_shut_down=True),
                              live(image), settings=SETTINGS, now_ms=1, next_offset=40,
                              register_offset=10)
    assert result.response.should_shut_down and result.response.is_fenced
    assert apply(image, result).partition("t", 0).leader == 2


def test_a_broker_unfenced_while_its_registration_is_shutting_down_leads_nothing() -> None:
    image = image_of(broker(1, epoch=10), topic("t", [[1]], leaders=[-1]),
                     broker(1, epoch=10, fenced=True, in_controlled_shutdown=True))
    result = broker_heartbeat(image, heartbeat(1, 10, 50), live(image), settings=SETTINGS,
                              now_ms=1, next_offset=60, register_offset=10)
    assert not result.response.is_fenced
    assert result.records == (BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10,
                                                             fenced=-1),)
    assert apply(image, result).partition("t", 0).leader == -1


def test_a_session_runs_from_the_answer_to_a_heartbeat_and_outlasts_a_held_loop() -> None:
    image = image_of(broker(1))
    heartbeats = live(image, 0)  # heard at 0
    heartbeats.answered(1, 5000)  # answered at 5000, after a long apply
    assert heartbeats.has_valid_session(image, 1, 5000 + TIMEOUT)
    assert not heartbeats.has_valid_session(image, 1, 5001 + TIMEOUT)
    heartbeats.extend_sessions(100_000)  # the loop was held until then
    assert heartbeats.has_valid_session(image, 1, 100_000 + TIMEOUT // 2)
    assert heartbeats.stale_broker(image, 100_001 + TIMEOUT // 2) == 1
    heartbeats.waiting(1, +1)  # a heartbeat awaits its answer: the broker is alive
    assert heartbeats.stale_broker(image, 10**9) is None
    assert heartbeats.has_valid_session(image, 1, 10**9)
    heartbeats.waiting(1, -1)
    assert heartbeats.stale_broker(image, 10**9) == 1
