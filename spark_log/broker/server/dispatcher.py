"""From a request frame to response frame parts: parse, check the version, call the handler, encode.

An API version the broker does not serve closes the connection (as Kafka does), except
ApiVersions, which gets the v0 error reply listing our range so the client can retry. A handler
returns a version-independent dict that is built into the response entity of the request's
version (`entity_build.build`); Fetch responses are encoded as parts so record bytes go out with
`os.sendfile`. The hottest handlers may encode their own answer: Produce returns the frame's
bytes, Fetch (usually) its parts.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from spark_log.broker.server.connection import Later
from spark_log.broker.server.handlers.registry import Handler
from spark_log.broker.server.request_context import RequestContext
from spark_log.protocol import (
    ProtocolError,
    decode_served_request,
    encode_api_versions_unsupported,
    encode_fetch_response,
    encode_response,
    parse_request,
    spec_for,
)
from spark_log.protocol.api_keys import ApiKey
from spark_log.protocol.entity_build import build

if TYPE_CHECKING:
    from spark_log.broker.server.connection import Part, Peer
    from spark_log.broker.server.services import Services

log = logging.getLogger(__name__)

# Requests whose coordinator writes (to __consumer_offsets, __transaction_state, or markers)
# must be on every in-sync replica before they are answered, and how long that may take
# (Kafka's offsets.commit.timeout.ms).
COORDINATOR_WRITES = frozenset({
    ApiKey.OFFSET_COMMIT, ApiKey.TXN_OFFSET_COMMIT, ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP,
    ApiKey.LEAVE_GROUP, ApiKey.DELETE_GROUPS, ApiKey.OFFSET_DELETE, ApiKey.INIT_PRODUCER_ID,
    ApiKey.ADD_PARTITIONS_TO_TXN, ApiKey.ADD_OFFSETS_TO_TXN, ApiKey.END_TXN,
    ApiKey.WRITE_TXN_MARKERS})
REPLICATION_WAIT_S = 5.0


class Dispatcher:
    """Routes requests to handlers. Stateless apart from the handler table and API set (the
    one `services.api_set` was built from the same table)."""

    def __init__(self, services: Services, handlers: Mapping[int, Handler]) -> None:
        self._services = services
        self._handlers = dict(handlers)
        self.api_set = services.api_set

    async def respond(self, frame: memoryview, peer: Peer) -> Sequence[Part] | Later | None:
        header, body = parse_request(frame)
        if not self.api_set.accepts(header.api_key, header.api_version):
            if header.api_key == ApiKey.API_VERSIONS:
                return [encode_api_versions_unsupported(header.correlation_id)]
            raise ProtocolError(
                f"unsupported request: API key {header.api_key} version {header.api_version} "
                f"from client {header.client_id!r}"
            )
        request = decode_served_request(header, body)
        ctx = RequestContext(header, peer, self._services)
        started = time.perf_counter()
        value = await self._handlers[header.api_key](ctx, request)
        if header.api_key in COORDINATOR_WRITES and not \
                await self._services.replicas.coordinator_writes_replicated(REPLICATION_WAIT_S):
            # The write may be lost with this leader: no answer, so the client asks again
            # (Kafka's coordinators answer only once their appends are replicated).
            raise ProtocolError(f"{ApiKey(header.api_key).name}: the coordinator's write was "
                                f"not replicated within {REPLICATION_WAIT_S}s; closing")
        self._services.metrics.observe_request(header.api_key, time.perf_counter() - started)
        if value is None or isinstance(value, Later):  # none due, or it comes later
            return value
        if isinstance(value, bytes):  # a hot-path handler encoded its own frame (Produce)
            return [value]
        if isinstance(value, list):  # ... or its frame's parts (Fetch)
            return value
        return self._encode(header.api_key, header.api_version, header.correlation_id, value)

    @staticmethod
    def _encode(api_key: int, version: int, correlation_id: int, value: Any) -> list[Part]:
        spec = spec_for(api_key)
        assert spec is not None
        response = build(spec.response_type(version), value)
        if api_key == ApiKey.FETCH:
            return encode_fetch_response(correlation_id, response)
        return [encode_response(correlation_id, response)]
