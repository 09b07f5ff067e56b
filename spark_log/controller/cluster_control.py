"""Broker registration and liveness as the active controller decides them (Kafka's
ClusterControlManager, BrokerHeartbeatManager.calculateNextBrokerState and
ReplicationControlManager.processBrokerHeartbeat): BrokerRegistration, BrokerHeartbeat,
UnregisterBroker, and fencing brokers whose session expired.

A broker's life: it registers (fenced; a new incarnation's broker epoch is the offset of its
RegisterBrokerRecord, so the caller passes `next_offset`, the offset the result's first record
will get, and appends the result as one batch there); it heartbeats, and is unfenced once its
metadata offset reaches that record (Kafka's "caught up", KAFKA-13959); asking to shut down
moves its leaderships off (controlled shutdown) and it is told to stop once it leads nothing and
every active broker's metadata has reached the offset of that change; a broker that stops
heartbeating for `broker.session.timeout.ms` is fenced and its leaderships move. Heartbeat times
live in `BrokerHeartbeats`, which these functions update (soft state, never in the log).
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from spark_log.metadata import MetadataImage
from spark_log.metadata.records import BrokerEndpoint, RegisterBrokerRecord
from spark_log.protocol import ErrorCode

from .broker_heartbeats import BrokerHeartbeats
from .broker_leadership import (
    Changes,
    enter_controlled_shutdown,
    fence_broker,
    has_leaderships,
    leave_partitions,
    unfence_broker,
    unregister_broker_records,
)
from .controller_result import ControllerError, ControllerResult, response_for
from .controller_settings import ControllerSettings
from .feature_control import finalized_features, registration_features

__all__ = [
    "BrokerState",
    "broker_heartbeat",
    "fence_stale_broker",
    "register_broker",
    "unregister_broker",
]


class BrokerState(Enum):
    """Kafka's BrokerControlState: (fenced, in controlled shutdown, should shut down)."""

    FENCED = (True, False, False)
    UNFENCED = (False, False, False)
    CONTROLLED_SHUTDOWN = (False, True, False)
    SHUTDOWN_NOW = (True, False, True)

    @property
    def fenced(self) -> bool:
        return self.value[0]

    @property
    def should_shut_down(self) -> bool:
        return self.value[2]


# ---- registration ---------------------------------------------------------------------------

def register_broker(image: MetadataImage, request: Any, heartbeats: BrokerHeartbeats, *,
                    settings: ControllerSettings, now_ms: int,
                    next_offset: int) -> ControllerResult[Any]:
    """A BrokerRegistration (v0-v4): the RegisterBrokerRecord and the response with the
    broker epoch. A new incarnation is registered fenced with epoch `next_offset`; the same
    incarnation re-registering keeps its epoch and state; a broker id another incarnation holds
    with a live session is refused (DUPLICATE_BROKER_REGISTRATION), unless the new one is the
    broker in this controller's own process (`settings.local_broker_incarnation`)."""
    try:
        record, changes = _registration(image, request, heartbeats, settings, now_ms,
                                        next_offset)
    except ControllerError as exc:
        return ControllerResult.of((), response_for(request, {
            "error_code": exc.code, "broker_epoch": -1}))
    existing = image.broker(request.broker_id)
    new_incarnation = existing is None or existing.incarnation_id != request.incarnation_id
    if new_incarnation:
        heartbeats.remove(request.broker_id)
    heartbeats.register(request.broker_id, now_ms, new_incarnation)
    response = response_for(request, {"error_code": ErrorCode.none,
                                      "broker_epoch": record.broker_epoch})
    return ControllerResult.of([record, *changes.records], response, changes.unclean)


def _registration(image: MetadataImage, request: Any, heartbeats: BrokerHeartbeats,
                  settings: ControllerSettings, now_ms: int,
                  next_offset: int) -> tuple[RegisterBrokerRecord, Changes]:
    """The record registering the broker, then the moves off its previous incarnation."""
    if request.cluster_id != settings.cluster_id:
        raise ControllerError(ErrorCode.inconsistent_cluster_id,
                              f"Expected cluster ID {settings.cluster_id}, but got cluster ID "
                              f"{request.cluster_id}")
    broker_id = request.broker_id
    existing = image.broker(broker_id)
    if (existing is not None and existing.incarnation_id != request.incarnation_id
            and heartbeats.has_valid_session(image, broker_id, now_ms)
            and not _successor_in_this_process(settings, request)):
        raise ControllerError(ErrorCode.duplicate_broker_registration,
                              "Another broker is registered with that broker id.")
    if getattr(request, "is_migrating_zk_broker", False):
        raise ControllerError(ErrorCode.broker_id_not_registered,
                              "Controller does not support registering ZK brokers.")
    features = registration_features(
        ((f.name, f.min_supported_version, f.max_supported_version)
                    for f in request.features), finalized_features(image))
    record = RegisterBrokerRecord(
        broker_id=broker_id, incarnation_id=request.incarnation_id, rack=request.rack,
        end_points=tuple(BrokerEndpoint(name=point.name, host=point.host, port=point.port,
                                        security_protocol=point.security_protocol)
                         for point in request.listeners),
        features=features, broker_epoch=next_offset)
    changes = Changes()
    if existing is not None and existing.incarnation_id == request.incarnation_id:
        record = _amended(record, existing.epoch, existing.fenced,
                          existing.in_controlled_shutdown)
    elif existing is not None:
        leave_partitions(image, settings, broker_id, changes)
    return record, changes


def _successor_in_this_process(settings: ControllerSettings, request: Any) -> bool:
    """Whether the registering broker is the one in this controller's own process (a combined
    node restarted, after SIGKILL say): the incarnation it replaces ran in an earlier process of
    this node, which has ended, so its session need not run out first."""
    return (settings.local_broker_incarnation is not None
            and request.broker_id == settings.node_id
            and request.incarnation_id == settings.local_broker_incarnation)


def _amended(record: RegisterBrokerRecord, epoch: int, fenced: bool,
             in_controlled_shutdown: bool) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id=record.broker_id, incarnation_id=record.incarnation_id, rack=record.rack,
        end_points=record.end_points, features=record.features, broker_epoch=epoch,
        fenced=fenced, in_controlled_shutdown=in_controlled_shutdown)


def unregister_broker(image: MetadataImage, request: Any, heartbeats: BrokerHeartbeats, *,
                      settings: ControllerSettings) -> ControllerResult[Any]:
    """An UnregisterBroker: the broker's leaderships move off, then UnregisterBrokerRecord;
    BROKER_ID_NOT_REGISTERED for a broker id that is not registered."""
    broker_id = request.broker_id
    if image.broker(broker_id) is None:
        return ControllerResult.of((), response_for(request, {
            "error_code": ErrorCode.broker_id_not_registered, "error_message": None}))
    changes = unregister_broker_records(image, settings, broker_id)
    heartbeats.remove(broker_id)
    return ControllerResult.of(changes.records, response_for(request, {
        "error_code": ErrorCode.none, "error_message": None}), changes.unclean)


# ---- heartbeats -----------------------------------------------------------------------------

def broker_heartbeat(image: MetadataImage, request: Any, heartbeats: BrokerHeartbeats, *,
                     settings: ControllerSettings, now_ms: int, next_offset: int,
                     register_offset: int | None) -> ControllerResult[Any]:
    """A BrokerHeartbeat (v0-v2): the records of the broker's state change (fenced, unfenced,
    in controlled shutdown) and the response. `register_offset` is the offset of the broker's
    RegisterBrokerRecord (WorkingImage.register_offset), None if it never registered."""
    broker = image.broker(request.broker_id)
    if broker is None or register_offset is None:
        return _stale_epoch(request)  # Kafka: "a heartbeat ... before registration"
    if broker.epoch != request.broker_epoch:
        return _stale_epoch(request)
    current, next_state = _next_state(image, request, heartbeats, register_offset)
    changes = Changes()
    if current is not next_state:
        changes = _transition(image, settings, request.broker_id, next_state)
    heartbeats.touch(request.broker_id, now_ms, request.current_metadata_offset,
                     next_state.fenced)
    if next_state is BrokerState.CONTROLLED_SHUTDOWN:
        heartbeats.start_controlled_shutdown(request.broker_id,
                                             next_offset + len(changes.records) - 1)
    response = response_for(request, {
        "error_code": ErrorCode.none,
        "is_caught_up": request.current_metadata_offset >= register_offset,
        "is_fenced": next_state.fenced,
        "should_shut_down": next_state.should_shut_down,
    })
    return ControllerResult.of(changes.records, response, changes.unclean)


def _stale_epoch(request: Any) -> ControllerResult[Any]:
    """STALE_BROKER_EPOCH (the response carries the code only, as Kafka's)."""
    return ControllerResult.of((), response_for(request, {
        "error_code": ErrorCode.stale_broker_epoch, "should_shut_down": False}))


def _next_state(image: MetadataImage, request: Any, heartbeats: BrokerHeartbeats,
                register_offset: int) -> tuple[BrokerState, BrokerState]:
    """(current, next) as Kafka's calculateNextBrokerState decides them."""
    broker_id = request.broker_id
    broker = image.brokers[broker_id]
    if broker.fenced:
        if request.want_shut_down:
            return BrokerState.FENCED, BrokerState.SHUTDOWN_NOW
        if not request.want_fence and request.current_metadata_offset >= register_offset:
            return BrokerState.FENCED, BrokerState.UNFENCED
        return BrokerState.FENCED, BrokerState.FENCED
    if heartbeats.shutting_down(broker_id):
        current = BrokerState.CONTROLLED_SHUTDOWN
        if has_leaderships(image, broker_id):
            return current, current
        lowest = heartbeats.lowest_active_offset(image)
        contact = heartbeats.contacts[broker_id]
        if lowest is None or contact.controlled_shutdown_offset <= lowest:
            return current, BrokerState.SHUTDOWN_NOW
        return current, current
    current = BrokerState.UNFENCED
    if request.want_fence:
        return current, (BrokerState.SHUTDOWN_NOW if request.want_shut_down
                         else BrokerState.FENCED)
    if request.want_shut_down:
        return current, (BrokerState.CONTROLLED_SHUTDOWN if has_leaderships(image, broker_id)
                         else BrokerState.SHUTDOWN_NOW)
    return current, current


def _transition(image: MetadataImage, settings: ControllerSettings, broker_id: int,
                state: BrokerState) -> Changes:
    broker = image.brokers[broker_id]
    if state is BrokerState.UNFENCED:
        return unfence_broker(image, settings, broker_id)
    if state is BrokerState.CONTROLLED_SHUTDOWN:
        return enter_controlled_shutdown(image, settings, broker_id)
    if broker.fenced:  # a fenced broker told to shut down: nothing left to change
        return Changes()
    return fence_broker(image, settings, broker_id)


# ---- session expiry -------------------------------------------------------------------------

def fence_stale_broker(image: MetadataImage, heartbeats: BrokerHeartbeats, *,
                       settings: ControllerSettings, now_ms: int) -> ControllerResult[int | None]:
    """Fence the unfenced broker whose session expired first (one per call, as Kafka does, so
    each fencing is visible before the next is decided: append the result, then call again);
    the response is its id, None when every session is live."""
    broker_id = heartbeats.stale_broker(image, now_ms)
    if broker_id is None:
        return ControllerResult.of((), None)
    changes = fence_broker(image, settings, broker_id)
    contact = heartbeats.contact(broker_id)
    if contact is not None:
        contact.controlled_shutdown_offset = -1
    return ControllerResult.of(changes.records, broker_id, changes.unclean)

