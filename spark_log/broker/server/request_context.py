"""What a handler knows about the request it serves: header, peer, and the broker's parts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from spark_log.protocol import RequestHeader

if TYPE_CHECKING:
    from spark_log.broker.broker import Broker
    from spark_log.broker.server.connection import Peer


@dataclass(frozen=True, slots=True)
class RequestContext:
    header: RequestHeader
    peer: Peer
    broker: Broker

    @property
    def version(self) -> int:
        return self.header.api_version

    @property
    def client_id(self) -> str:
        return self.header.client_id
