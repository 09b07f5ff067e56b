"""ApiVersions: which API keys and versions this broker serves."""

from __future__ import annotations

from typing import Any

from spark_log.broker.server.handlers.registry import handles
from spark_log.broker.server.request_context import RequestContext
from spark_log.protocol import ErrorCode, is_valid_client_software
from spark_log.protocol.api_keys import ApiKey


@handles(ApiKey.API_VERSIONS)
async def handle_api_versions(ctx: RequestContext, request: Any) -> Any:
    api_set = ctx.services.api_set
    if not is_valid_client_software(request):
        return api_set.api_versions_response(ctx.version, error_code=ErrorCode.invalid_request)
    return api_set.api_versions_response(ctx.version)
