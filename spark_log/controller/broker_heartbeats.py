"""The soft state of broker liveness (Kafka's BrokerHeartbeatManager): when each broker last
heartbeated, the metadata offset it reported, and the offset at which its controlled shutdown
completes. None of it is in the metadata log: only the active controller keeps it, and a newly
active controller starts every registered broker's session afresh (`activate`), so failing over
may delay fencing a dead broker by up to a session.

Whether a broker is fenced or in controlled shutdown is the registration's, read from the
working image; this object keeps only what the log does not hold.
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_log.metadata import MetadataImage

__all__ = ["BrokerContact", "BrokerHeartbeats"]


@dataclass
class BrokerContact:
    """What the controller last heard from one broker. `controlled_shutdown_offset` is -1 unless
    the broker is shutting down: then the broker may stop once every active broker's metadata
    offset has reached it."""

    last_contact_ms: int
    metadata_offset: int = -1
    controlled_shutdown_offset: int = -1
    answers_owed: int = 0  # heartbeats received and not yet answered

    @property
    def shutting_down(self) -> bool:
        return self.controlled_shutdown_offset >= 0


class BrokerHeartbeats:
    """Broker sessions, owned by the active controller's driver.

    Invariants: a broker has a session while it is registered and unfenced and it was heard
    from within `session_timeout_ms` or a heartbeat of it awaits its answer; a fenced broker is
    never shutting down (fencing clears the controlled-shutdown offset); `contacts` holds only
    brokers that registered or heartbeated since `activate`, and loses a broker when it
    registers anew or unregisters. Times are milliseconds of a monotonic clock, passed in.
    """

    def __init__(self, session_timeout_ms: int) -> None:
        self.session_timeout_ms = session_timeout_ms
        self.contacts: dict[int, BrokerContact] = {}

    def activate(self, image: MetadataImage, now_ms: int) -> None:
        """Become the active controller: every registered broker's session starts now."""
        self.contacts = {broker_id: BrokerContact(now_ms) for broker_id in image.brokers}

    def contact(self, broker_id: int) -> BrokerContact | None:
        return self.contacts.get(broker_id)

    def register(self, broker_id: int, now_ms: int, new_incarnation: bool) -> None:
        """A registration was accepted: a new incarnation starts a fresh session; an amended
        one keeps its shutdown state."""
        previous = self.contacts.get(broker_id)
        if new_incarnation or previous is None:
            self.contacts[broker_id] = BrokerContact(now_ms)
        else:
            previous.last_contact_ms = now_ms
            previous.metadata_offset = -1

    def touch(self, broker_id: int, now_ms: int, metadata_offset: int, fenced: bool) -> None:
        """A heartbeat was processed; `fenced` is the broker's state after it."""
        contact = self.contacts.setdefault(broker_id, BrokerContact(now_ms))
        contact.last_contact_ms = now_ms
        contact.metadata_offset = metadata_offset
        if fenced:
            contact.controlled_shutdown_offset = -1

    def waiting(self, broker_id: int | None, change: int) -> None:
        """A heartbeat of `broker_id` starts (+1) or stops (-1) waiting for its answer."""
        contact = self.contacts.get(broker_id) if broker_id is not None else None
        if contact is not None:
            contact.answers_owed = max(contact.answers_owed + change, 0)

    def answered(self, broker_id: int, now_ms: int) -> None:
        """The broker's heartbeat was answered at `now_ms`: it was waiting until then."""
        contact = self.contacts.get(broker_id)
        if contact is not None:
            contact.last_contact_ms = max(contact.last_contact_ms, now_ms)

    def extend_sessions(self, now_ms: int) -> None:
        """The controller could not listen until `now_ms` (its loop was held): every session
        lasts at least half a session more, for the heartbeats that waited to be heard."""
        floor = now_ms - self.session_timeout_ms // 2
        for contact in self.contacts.values():
            contact.last_contact_ms = max(contact.last_contact_ms, floor)

    def start_controlled_shutdown(self, broker_id: int, offset: int) -> None:
        """The broker's controlled shutdown completes at `offset` (kept if already set)."""
        contact = self.contacts.get(broker_id)
        if contact is not None and not contact.shutting_down:
            contact.controlled_shutdown_offset = offset

    def remove(self, broker_id: int) -> None:
        self.contacts.pop(broker_id, None)

    def shutting_down(self, broker_id: int) -> bool:
        contact = self.contacts.get(broker_id)
        return contact is not None and contact.shutting_down

    def has_valid_session(self, image: MetadataImage, broker_id: int, now_ms: int) -> bool:
        """Registered, unfenced and heard from within the session timeout."""
        broker = image.broker(broker_id)
        contact = self.contacts.get(broker_id)
        if broker is None or broker.fenced or contact is None:
            return False
        return bool(contact.answers_owed) or \
            contact.last_contact_ms + self.session_timeout_ms >= now_ms

    def stale_broker(self, image: MetadataImage, now_ms: int) -> int | None:
        """The unfenced broker whose session expired longest ago, if any (ties: lowest id)."""
        expired = [(contact.last_contact_ms, broker_id)
                   for broker_id, contact in self.contacts.items()
                   if (broker := image.broker(broker_id)) is not None and not broker.fenced
                   and not contact.answers_owed
                   and contact.last_contact_ms + self.session_timeout_ms < now_ms]
        return min(expired)[1] if expired else None

    def next_expiry_ms(self, image: MetadataImage) -> int | None:
        """When the next session of an unfenced broker expires (for the caller's timer)."""
        times = [contact.last_contact_ms + self.session_timeout_ms
                 for broker_id, contact in self.contacts.items()
                 if (broker := image.broker(broker_id)) is not None and not broker.fenced]
        return min(times) + 1 if times else None

    def lowest_active_offset(self, image: MetadataImage) -> int | None:
        """The lowest metadata offset reported by an active broker (unfenced, not shutting
        down); None when there is none."""
        offsets = [contact.metadata_offset for broker_id, contact in self.contacts.items()
                   if (broker := image.broker(broker_id)) is not None and not broker.fenced
                   and not contact.shutting_down]
        return min(offsets) if offsets else None
