"""Request handlers, one module per API family (as franz-go's kfake keeps them).

Owns the translation of each API's wire versions into calls on the broker's parts, which a
handler reaches through its `RequestContext` (`ctx.services`, typed by the narrow protocols of
`server.services`), never through the Broker. Handler modules may import protocol/, records/,
storage/ types, the broker's errors and config, and the value types of group/ and transaction/;
`registry` holds the table they register in.
"""

from __future__ import annotations

from spark_log.broker.server.handlers.registry import HANDLERS, Handler


def load_all() -> dict[int, Handler]:
    """Import every handler module so that each registers its API keys."""
    from . import (  # noqa: F401
        api_versions,
        configs,
        fetch,
        groups,
        list_offsets,
        log_dirs,
        metadata,
        offsets,
        partition_reassignments,
        produce,
        producer_ids,
        quorum_admin,
        topics,
        transaction_admin,
        transactions,
    )

    return HANDLERS
