"""The controller listener's request path (Kafka's ControllerApis): the quorum's RPCs (Vote,
BeginQuorumEpoch, EndQuorumEpoch, Fetch of `__cluster_metadata`, FetchSnapshot, DescribeQuorum)
go to this node's quorum replica; the controller APIs (broker registration and heartbeats,
producer-id blocks, and the admin requests brokers forward) to its controller, which answers
NOT_CONTROLLER unless it is the active one; ApiVersions lists what this listener serves.

Handlers here return kio entities, built by the quorum driver or the controller in the
request's version. A quorum request the replica does not answer (it stopped, or dropped it)
gets no response: the requester's own timeout retries.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from kio.static.protocol import RequestPayload, ResponsePayload

from spark_log.protocol import (
    ApiSet,
    ProtocolError,
    decode_request_body,
    encode_api_versions_unsupported,
    encode_fetch_response,
    encode_response,
    is_valid_client_software,
    parse_request,
)
from spark_log.protocol.api_keys import ApiKey
from spark_log.protocol.api_table import CONTROLLER_API_TABLE, QUORUM_API_TABLE
from spark_log.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from spark_log.broker.server.connection import Part, Peer

# Admin requests brokers forward to the active controller.
FORWARDED = frozenset({ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.CREATE_PARTITIONS,
                       ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS,
                       ApiKey.ELECT_LEADERS, ApiKey.ALTER_PARTITION_REASSIGNMENTS,
                       ApiKey.LIST_PARTITION_REASSIGNMENTS})
QUORUM_KEYS = frozenset({*QUORUM_API_TABLE, ApiKey.FETCH})
CONTROLLER_KEYS = frozenset({*CONTROLLER_API_TABLE, *FORWARDED})
API_KEYS = frozenset({ApiKey.API_VERSIONS, *QUORUM_KEYS, *CONTROLLER_KEYS})


class Quorum(Protocol):
    async def handle_request(self, request: RequestPayload) -> ResponsePayload | None: ...


class Controller(Protocol):
    async def handle(self, request: RequestPayload) -> ResponsePayload: ...


class ControllerDispatcher:
    """Stateless apart from what it routes to. Event-loop only."""

    def __init__(self, quorum: Quorum, controller: Controller | None) -> None:
        self.quorum, self.controller = quorum, controller
        keys = API_KEYS if controller is not None else {ApiKey.API_VERSIONS, *QUORUM_KEYS}
        self.api_set = ApiSet(keys, topic_ids=True)

    async def respond(self, frame: memoryview, peer: Peer) -> Sequence[Part] | None:
        header, body = parse_request(frame)
        if not self.api_set.accepts(header.api_key, header.api_version):
            if header.api_key == ApiKey.API_VERSIONS:
                return [encode_api_versions_unsupported(header.correlation_id)]
            raise ProtocolError(f"not served on the controller listener: API key "
                                f"{header.api_key} version {header.api_version}")
        request = decode_request_body(header, body)
        response = await self._answer(header.api_key, header.api_version, request)
        if response is None:
            return None
        if header.api_key == ApiKey.FETCH:
            return encode_fetch_response(header.correlation_id, response)
        return [encode_response(header.correlation_id, response)]

    async def handle(self, request: RequestPayload) -> ResponsePayload | None:
        """What this node's controller side answers `request` with: the broker's path to it
        when this node is the active controller (no network in between)."""
        return await self._answer(request.__api_key__, request.__version__, request)

    async def _answer(self, api_key: int, version: int, request: RequestPayload
                      ) -> ResponsePayload | None:
        if api_key == ApiKey.API_VERSIONS:
            error = ErrorCode.none if is_valid_client_software(request) \
                else ErrorCode.invalid_request
            return self.api_set.api_versions_response(version, error_code=error)
        if api_key in QUORUM_KEYS:
            return await self.quorum.handle_request(request)
        assert self.controller is not None
        return await self.controller.handle(request)
