"""The exactly-once sink's options and the identity that ties a query's runs together.

`exactlyOnce` switches the streaming sink between at-least-once (an idempotent producer per
task) and exactly-once (transactions committed on the driver, `stream_writer`). Exactly-once has
to recognise a query when it is restarted from its checkpoint, on the driver, before any task
runs; a Python sink cannot see Spark's query id there, so the identity is taken from what the
sink's options carry, in this order:

1. `transactionalIdPrefix` — given explicitly (keep it when a checkpoint is moved);
2. `checkpointLocation` — when it is given with `.option(...)` (Spark passes it to the sink);
3. `queryName` — Spark puts a query's checkpoint under `spark.sql.streaming.checkpointLocation`
   / queryName when no location option is given, so the name identifies it there.

Without any of them the checkpoint is a fresh random directory, the query cannot be restarted,
and exactly-once is refused with a message saying what to set. The prefix names every
transactional id and group of the query (`txn_ids`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

from .errors import PylogOptionError

TXN_OPTIONS = ("exactlyOnce", "transactionalIdPrefix", "sourceGroupId")
DEFAULT_EXACTLY_ONCE = True
# librdkafka's own default is 60 s; Kafka brokers allow up to transaction.max.timeout.ms (15 min
# by default, the embedded broker too), and a transaction must outlive its micro-batch.
DEFAULT_TRANSACTION_TIMEOUT_MS = 900_000
TIMEOUT_KEY = "transaction.timeout.ms"


@dataclass(frozen=True)
class TxnOptions:
    """Exactly-once settings of a streaming sink. Invariant: when `enabled`, `prefix` is a
    non-empty transactional id prefix stable across restarts of the query, and
    `timeout_ms` > 0."""

    enabled: bool
    prefix: str = ""
    source_groups: tuple[str, ...] = ()
    timeout_ms: int = DEFAULT_TRANSACTION_TIMEOUT_MS


def _get(options: Mapping[str, str], name: str) -> str | None:
    value = options.get(name.lower())
    return None if value is None else str(value).strip()


def _flag(options: Mapping[str, str]) -> bool | None:
    value = _get(options, "exactlyOnce")
    if value is None:
        return None
    if value.lower() not in ("true", "false"):
        raise PylogOptionError(f"Option 'exactlyOnce' must be 'true' or 'false', got {value!r}")
    return value.lower() == "true"


def parse_txn_options(options: Mapping[str, str], kafka_conf: Mapping[str, str], *,
                      streaming: bool) -> TxnOptions:
    """Validate the exactly-once options. Batch writes (including foreachBatch) accept
    `exactlyOnce` but are at least once: they have no micro-batch to commit atomically."""
    flag = _flag(options)
    if "transactional.id" in kafka_conf:
        # The producer would turn transactional and every write would fail: refuse it here.
        raise PylogOptionError(
            "Option 'kafka.transactional.id' cannot be set: pylog's writers manage producers "
            "themselves (exactly-once streaming writes derive one transactional id per task "
            "from 'transactionalIdPrefix').")
    if not streaming:
        for name in ("transactionalIdPrefix", "sourceGroupId"):
            if _get(options, name):
                raise PylogOptionError(f"Option '{name}' applies to streaming writes only "
                                       "(writeStream with exactlyOnce).")
        return TxnOptions(False)
    if not (DEFAULT_EXACTLY_ONCE if flag is None else flag):
        return TxnOptions(False)
    protocol = str(kafka_conf.get("security.protocol", "plaintext")).strip().lower()
    if protocol != "plaintext":
        # The driver's transaction control requests use a plaintext connection of their own.
        raise PylogOptionError(
            f"Exactly-once writes need a PLAINTEXT listener; 'kafka.security.protocol' is "
            f"{kafka_conf['security.protocol']!r}. Use a plaintext listener, or set "
            "exactlyOnce=false for at-least-once writes over TLS or SASL.")
    return TxnOptions(True, resolve_prefix(options), _groups(options),
                      _timeout(kafka_conf))


def resolve_prefix(options: Mapping[str, str]) -> str:
    explicit = _get(options, "transactionalIdPrefix")
    if explicit is not None:
        if not explicit:
            raise PylogOptionError("Option 'transactionalIdPrefix' is empty.")
        return explicit
    checkpoint = _get(options, "checkpointLocation")
    name = _get(options, "queryName")
    if checkpoint:
        basis = "checkpoint:" + checkpoint.rstrip("/")
    elif name:
        basis = "queryName:" + name
    else:
        raise PylogOptionError(
            "Exactly-once writes must recognise the query when it restarts: give the "
            "checkpoint with .option('checkpointLocation', ...), name the query with "
            ".queryName(...), or set 'transactionalIdPrefix' (or set exactlyOnce=false).")
    return "pylog-" + hashlib.sha256(basis.encode()).hexdigest()[:16]


def _groups(options: Mapping[str, str]) -> tuple[str, ...]:
    value = _get(options, "sourceGroupId")
    if value is None:
        return ()
    groups = tuple(g.strip() for g in value.split(",") if g.strip())
    if not groups:
        raise PylogOptionError("Option 'sourceGroupId' is empty: give the groupId of the "
                               "query's pylog source(s).")
    return groups


def _timeout(kafka_conf: Mapping[str, str]) -> int:
    value = kafka_conf.get(TIMEOUT_KEY)
    if value is None:
        return DEFAULT_TRANSACTION_TIMEOUT_MS
    try:
        timeout = int(str(value).strip())
    except ValueError:
        raise PylogOptionError(
            f"Option 'kafka.{TIMEOUT_KEY}' must be a whole number of ms, got {value!r}") from None
    if timeout <= 0:
        raise PylogOptionError(f"Option 'kafka.{TIMEOUT_KEY}' must be > 0, got {timeout}")
    return timeout
