"""What a handler knows about the request it serves: its header, the peer, and the broker's
parts as `Services`."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from spark_log.protocol import RequestHeader

if TYPE_CHECKING:
    from spark_log.broker.server.connection import Peer
    from spark_log.broker.server.services import Services


class RequestContext(NamedTuple):  # built per request: a tuple, not a frozen dataclass
    header: RequestHeader
    peer: Peer
    services: Services

    @property
    def version(self) -> int:
        return self.header.api_version

    @property
    def client_id(self) -> str:
        return self.header.client_id
