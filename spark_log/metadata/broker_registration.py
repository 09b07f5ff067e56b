"""A registered broker as the image holds it (Kafka's BrokerRegistration): id, epoch,
incarnation id, endpoints by listener name, rack, supported features, and whether it is fenced
or in controlled shutdown; built from a RegisterBrokerRecord and written back as one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import IntEnum
from types import MappingProxyType
from uuid import UUID

from .records import BrokerEndpoint, BrokerFeature, RegisterBrokerRecord

__all__ = ["BrokerRegistration", "Endpoint", "SecurityProtocol"]


class SecurityProtocol(IntEnum):
    """Kafka's security protocol ids, as endpoints carry them."""

    PLAINTEXT = 0
    SSL = 1
    SASL_PLAINTEXT = 2
    SASL_SSL = 3


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where a listener of a broker is reached."""

    listener: str
    host: str
    port: int
    security_protocol: int = SecurityProtocol.PLAINTEXT


def _frozen(mapping: Mapping) -> Mapping:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True)
class BrokerRegistration:
    """One registered broker.

    Invariants: `epoch` is the epoch the controller gave this registration; a fence, unfence or
    registration change applies only to the registration of the same epoch. A broker that is
    fenced or in controlled shutdown is not active: it may not lead partitions, and new
    partitions do not put it in their ISR. `endpoints` and `supported_features` are read-only.
    """

    id: int
    epoch: int
    incarnation_id: UUID
    endpoints: Mapping[str, Endpoint] = field(default_factory=lambda: MappingProxyType({}))
    rack: str | None = None
    fenced: bool = True
    in_controlled_shutdown: bool = False
    supported_features: Mapping[str, tuple[int, int]] = field(
        default_factory=lambda: MappingProxyType({}))
    is_migrating_zk_broker: bool = False
    log_dirs: tuple[UUID, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "endpoints", _frozen(self.endpoints))
        object.__setattr__(self, "supported_features", _frozen(self.supported_features))

    __hash__ = None  # type: ignore[assignment]  # holds mappings

    @classmethod
    def from_record(cls, record: RegisterBrokerRecord) -> BrokerRegistration:
        """The registration a RegisterBrokerRecord announces (a later endpoint with the same
        listener name replaces an earlier one, as in Kafka)."""
        endpoints = {
            point.name: Endpoint(point.name, point.host, point.port, point.security_protocol)
            for point in record.end_points
        }
        features = {feature.name: (feature.min_supported_version,
                                   feature.max_supported_version)
                    for feature in record.features}
        return cls(
            id=record.broker_id,
            epoch=record.broker_epoch,
            incarnation_id=record.incarnation_id,
            endpoints=endpoints,
            rack=record.rack,
            fenced=record.fenced,
            in_controlled_shutdown=record.in_controlled_shutdown,
            supported_features=features,
            is_migrating_zk_broker=record.is_migrating_zk_broker,
            log_dirs=record.log_dirs,
        )

    def to_record(self) -> RegisterBrokerRecord:
        """The RegisterBrokerRecord that rebuilds this registration."""
        return RegisterBrokerRecord(
            broker_id=self.id,
            is_migrating_zk_broker=self.is_migrating_zk_broker,
            incarnation_id=self.incarnation_id,
            broker_epoch=self.epoch,
            end_points=tuple(
                BrokerEndpoint(name=name, host=point.host, port=point.port,
                               security_protocol=point.security_protocol)
                for name, point in self.endpoints.items()),
            features=tuple(
                BrokerFeature(name=name, min_supported_version=low, max_supported_version=high)
                for name, (low, high) in self.supported_features.items()),
            rack=self.rack,
            fenced=self.fenced,
            in_controlled_shutdown=self.in_controlled_shutdown,
            log_dirs=self.log_dirs,
        )

    @property
    def is_active(self) -> bool:
        """Unfenced and not shutting down: may lead, and joins the ISR of new partitions."""
        return not self.fenced and not self.in_controlled_shutdown

    def endpoint(self, listener: str) -> Endpoint | None:
        return self.endpoints.get(listener)

    def with_changes(
        self,
        fenced: bool | None = None,
        in_controlled_shutdown: bool | None = None,
        log_dirs: tuple[UUID, ...] | None = None,
    ) -> BrokerRegistration:
        """This registration with the given states changed (None: unchanged); itself when
        nothing changes."""
        new_fenced = self.fenced if fenced is None else fenced
        new_shutdown = (self.in_controlled_shutdown if in_controlled_shutdown is None
                        else in_controlled_shutdown)
        new_dirs = self.log_dirs if log_dirs is None else log_dirs
        if (new_fenced, new_shutdown, new_dirs) == (
                self.fenced, self.in_controlled_shutdown, self.log_dirs):
            return self
        return replace(self, fenced=new_fenced, in_controlled_shutdown=new_shutdown,
                       log_dirs=new_dirs)
