"""Record decoders of `dump-log --offsets-decoder` and `--transaction-log-decoder`: the key and
value of a `__consumer_offsets` or `__transaction_state` record as JSON-ready objects, in the
shape kafka-dump-log prints them: `{"type": N, "data": {...}}` for a key (N is the key's
version, which names its type), `{"version": N, "data": {...}}` for a value, and "<DELETE>"
for a tombstone. A record that does not decode gives the reason in place of its key.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from spark_log.broker.group import group_metadata_records as offsets
from spark_log.broker.transaction import transaction_log_records as txn_log
from spark_log.broker.transaction.transaction_metadata import TxnState
from spark_log.records import CorruptRecordError

Decoded = tuple[Any, Any]  # (key, payload) as JSON-ready objects
Decoder = Callable[[bytes | None, bytes | None], Decoded]
TOMBSTONE = "<DELETE>"


def _version(data: bytes) -> int:
    return int.from_bytes(data[:2], "big", signed=True)


def _json_ready(value: Any) -> Any:
    """Dataclass fields as JSON values: bytes as hex, tuples as lists."""
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, list | tuple):
        return [_json_ready(v) for v in value]
    if isinstance(value, dict):
        return {k: _json_ready(v) for k, v in value.items()}
    return value


def _guarded(decode: Callable[[bytes, bytes | None], Decoded]) -> Decoder:
    def safe(key: bytes | None, value: bytes | None) -> Decoded:
        if key is None:
            return "no key: not a coordinator record", None
        try:
            return decode(key, value)
        except (CorruptRecordError, ValueError, UnicodeDecodeError) as exc:
            return f"cannot decode: {exc}", None
    return safe


@_guarded
def decode_offsets_record(key: bytes, value: bytes | None) -> Decoded:
    """A `__consumer_offsets` record: an offset commit or a group's metadata."""
    decoded_key = offsets.decode_key(key)
    head = {"type": _version(key), "data": _json_ready(asdict(decoded_key))}
    if value is None:
        return head, TOMBSTONE
    if isinstance(decoded_key, offsets.OffsetCommitKey):
        body: Any = offsets.decode_offset_commit_value(value)
    elif isinstance(decoded_key, offsets.GroupMetadataKey):
        body = offsets.decode_group_metadata_value(value)
    else:
        return head, f"<{len(value)} bytes of an unknown record type>"
    return head, {"version": _version(value), "data": _json_ready(asdict(body))}


@_guarded
def decode_transaction_record(key: bytes, value: bytes | None) -> Decoded:
    """A `__transaction_state` record: the state of one transactional id."""
    head = {"type": _version(key), "data": {"transactional_id": txn_log.decode_key(key)}}
    if value is None:
        return head, TOMBSTONE
    data = _json_ready(asdict(txn_log.decode_value(value)))
    state = data["state"]
    data["state"] = TxnState(state).display_name if state in TxnState._value2member_map_ \
        else state
    return head, {"version": _version(value), "data": data}
