"""What one broker advertises in ApiVersions, and the replies Kafka gives to that request.

`ApiSet` is built from the API keys the broker has handlers for: only those are advertised,
and only their advertised versions are accepted (Kafka closes the connection on anything else,
except ApiVersions itself). A request for an ApiVersions version above ours gets
`encode_api_versions_unsupported`: a v0 body with UNSUPPORTED_VERSION and our ApiVersions range,
which tells the client which version to retry with (KIP-511).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import NamedTuple

from kio.static.protocol import RequestPayload, ResponsePayload

from .api_table import API_TABLE, API_VERSIONS_KEY, ApiSpec, spec_for
from .codec import encode_response
from .errors import ErrorCode
from .schema import shape_of

__all__ = [
    "ApiSet",
    "ApiVersionRange",
    "encode_api_versions_unsupported",
    "is_valid_client_software",
]

# Kafka's rule for ApiVersions v3+ client software name and version (else INVALID_REQUEST).
_SOFTWARE_PATTERN = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


class ApiVersionRange(NamedTuple):
    """One entry of the ApiVersions response."""

    api_key: int
    min_version: int
    max_version: int


class ApiSet:
    """The APIs a broker serves and the version ranges it advertises.

    Invariants: every key is in a protocol table (`spec_for`); each range lies within that
    API's table range (`topic_ids` picks the topic-ID ceiling, `caps` can only lower it);
    `ranges` is sorted by key and is exactly what `api_versions_response` lists.
    """

    def __init__(
        self,
        keys: Iterable[int],
        *,
        topic_ids: bool = False,
        caps: Mapping[int, int] | None = None,
    ) -> None:
        caps = dict(caps or {})
        specs: dict[int, ApiSpec] = {}
        for key in keys:
            spec = spec_for(key)
            if spec is None:
                raise ValueError(f"API key {key} is not in the protocol table")
            specs[key] = spec
        unknown_caps = caps.keys() - specs.keys()
        if unknown_caps:
            raise ValueError(f"caps for API keys not served: {sorted(unknown_caps)}")
        self._accepted: dict[int, tuple[int, int]] = {}
        ranges = []
        for key in sorted(specs):
            spec = specs[key]
            high = min(spec.highest(topic_ids), caps.get(key, spec.highest(topic_ids)))
            if high < spec.min_version:
                raise ValueError(f"cap {high} for {spec.name} is below its minimum version")
            self._accepted[key] = (spec.min_version, high)
            ranges.append(ApiVersionRange(key, spec.advertised_min_version, high))
        self.ranges: tuple[ApiVersionRange, ...] = tuple(ranges)

    def accepts(self, api_key: int, api_version: int) -> bool:
        """Whether a request of this key and version is served (advertised and decodable)."""
        accepted = self._accepted.get(api_key)
        return accepted is not None and accepted[0] <= api_version <= accepted[1]

    def api_versions_response(
        self, version: int, throttle_time_ms: int = 0, error_code: ErrorCode = ErrorCode.none
    ) -> ResponsePayload:
        """The ApiVersions response entity of `version`; encode it with `encode_response`.

        Without error it lists `ranges`. As in Kafka, an error reply lists nothing, except
        UNSUPPORTED_VERSION, which lists the ApiVersions range. No features are advertised, so
        clients stay on transactions v1.
        """
        if error_code == ErrorCode.none:
            ranges: tuple[ApiVersionRange, ...] = self.ranges
        elif error_code == ErrorCode.unsupported_version:
            ranges = (_api_versions_range(),)
        else:
            ranges = ()
        return _api_versions_response(version, ranges, throttle_time_ms, error_code)


def encode_api_versions_unsupported(correlation_id: int) -> bytes:
    """The frame Kafka sends for an ApiVersions request of a version it does not know.

    A v0 body (read by every client) with UNSUPPORTED_VERSION and, as the only entry, the
    ApiVersions range, so the client retries with a version we have.
    """
    response = _api_versions_response(0, (_api_versions_range(),), 0, ErrorCode.unsupported_version)
    return encode_response(correlation_id, response)


def _api_versions_range() -> ApiVersionRange:
    spec = API_TABLE[API_VERSIONS_KEY]
    return ApiVersionRange(API_VERSIONS_KEY, spec.min_version, spec.max_version)


def is_valid_client_software(request: RequestPayload) -> bool:
    """Kafka's check on an ApiVersions v3+ request; a False answer means INVALID_REQUEST."""
    name = getattr(request, "client_software_name", None)
    version = getattr(request, "client_software_version", None)
    if name is None and version is None:  # v0-v2 carry neither
        return True
    return all(
        isinstance(text, str) and _SOFTWARE_PATTERN.fullmatch(text) is not None
        for text in (name, version)
    )


def _api_versions_response(
    version: int,
    ranges: Iterable[ApiVersionRange],
    throttle_time_ms: int,
    error_code: ErrorCode,
) -> ResponsePayload:
    response_type = API_TABLE[API_VERSIONS_KEY].response_type(version)
    field_names = {field.name: field for field in shape_of(response_type).fields}
    entry_type = field_names["api_keys"].entity
    assert entry_type is not None
    entries = tuple(
        entry_type(api_key=r.api_key, min_version=r.min_version, max_version=r.max_version)
        for r in ranges
    )
    values: dict[str, object] = {"error_code": error_code, "api_keys": entries}
    if "throttle_time" in field_names:
        values["throttle_time"] = timedelta(milliseconds=throttle_time_ms)
    return response_type(**values)
