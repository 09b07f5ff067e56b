"""How `spark-log consume` prints a record: kafka-console-consumer's default formatter, or one
JSON object per line.

Default formatter properties (Kafka's names and defaults): `print.timestamp`,
`print.partition`, `print.offset`, `print.headers`, `print.key` (false) and `print.value`
(true), printed in that order separated by `key.separator` (tab), records ended by
`line.separator` (newline); headers as `k:v` joined by `headers.separator` (","), or
NO_HEADERS; a null key, value or header value prints as `null.literal` ("null").
"""

from __future__ import annotations

import json
from typing import Any

from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME

from .arguments import flag_bool, separator
from .errors import UsageError

KNOWN = frozenset({"print.timestamp", "print.partition", "print.offset", "print.headers",
                   "print.key", "print.value", "key.separator", "line.separator",
                   "headers.separator", "null.literal"})
_TIMESTAMP_TYPES = {TIMESTAMP_CREATE_TIME: "CreateTime", TIMESTAMP_LOG_APPEND_TIME:
                    "LogAppendTime"}


class DefaultFormatter:
    """Formats a confluent-kafka Message as bytes, as Kafka's DefaultMessageFormatter does."""

    def __init__(self, props: dict[str, str]) -> None:
        unknown = sorted(set(props) - KNOWN)
        if unknown:
            raise UsageError(f"--property {unknown[0]}: unknown; the formatter knows "
                             f"{', '.join(sorted(KNOWN))}")
        self.fields = [name for name in ("timestamp", "partition", "offset", "headers", "key")
                       if flag_bool(props, f"print.{name}")]
        self.print_value = flag_bool(props, "print.value", default=True)
        self.column = separator(props, "key.separator", "\t").encode()
        self.line = separator(props, "line.separator", "\n").encode()
        self.headers_separator = separator(props, "headers.separator", ",").encode()
        self.null = props.get("null.literal", "null").encode()

    def format(self, msg: Any) -> bytes:
        parts = [getattr(self, f"_{name}")(msg) for name in self.fields]
        if self.print_value:
            parts.append(self._or_null(msg.value()))
        return self.column.join(parts) + (self.line if self.print_value or parts else b"")

    def _or_null(self, data: bytes | None) -> bytes:
        return self.null if data is None else data

    def _timestamp(self, msg: Any) -> bytes:
        kind, ts = msg.timestamp()
        name = _TIMESTAMP_TYPES.get(kind)
        return f"{name}:{ts}".encode() if name else b"NO_TIMESTAMP"

    def _partition(self, msg: Any) -> bytes:
        return f"Partition:{msg.partition()}".encode()

    def _offset(self, msg: Any) -> bytes:
        return f"Offset:{msg.offset()}".encode()

    def _headers(self, msg: Any) -> bytes:
        headers = msg.headers() or []
        if not headers:
            return b"NO_HEADERS"
        return self.headers_separator.join(k.encode() + b":" + self._or_null(v)
                                           for k, v in headers)

    def _key(self, msg: Any) -> bytes:
        return self._or_null(msg.key())


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", errors="backslashreplace")


def json_record(msg: Any) -> dict[str, Any]:
    """A record as a JSON-ready dict; key, value and header values as UTF-8 text."""
    kind, ts = msg.timestamp()
    return {"topic": msg.topic(), "partition": msg.partition(), "offset": msg.offset(),
            "timestamp": ts if kind in _TIMESTAMP_TYPES else None,
            "timestamp_type": _TIMESTAMP_TYPES.get(kind), "key": _text(msg.key()),
            "value": _text(msg.value()),
            "headers": [[k, _text(v)] for k, v in (msg.headers() or [])]}


class JsonFormatter:
    def format(self, msg: Any) -> bytes:
        return json.dumps(json_record(msg)).encode() + b"\n"
