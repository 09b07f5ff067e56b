"""Parsing the values of flags that Kafka's tools spell as strings: `KEY=VALUE` properties,
booleans, separators with escapes, and points in time (epoch milliseconds or ISO 8601).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from .errors import UsageError

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_ESCAPES = {"\\t": "\t", "\\n": "\n", "\\r": "\r", "\\\\": "\\"}


def key_values(items: Iterable[str], flag: str) -> dict[str, str]:
    """`["a=1", "b=2"]` -> {"a": "1", "b": "2"}; UsageError naming `flag` otherwise."""
    props: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"{flag} expects KEY=VALUE, got {item!r}")
        props[key.strip()] = value
    return props


def flag_bool(props: dict[str, str], key: str, default: bool = False) -> bool:
    """A Kafka boolean property: "true" (any case) is true, anything else false."""
    value = props.get(key)
    return default if value is None else value.strip().lower() == "true"


def separator(props: dict[str, str], key: str, default: str) -> str:
    """A separator property; `\\t`, `\\n`, `\\r` and `\\\\` typed literally are unescaped."""
    value = props.get(key)
    if value is None:
        return default
    for escaped, plain in _ESCAPES.items():
        value = value.replace(escaped, plain)
    return value


def timestamp_ms(text: str, flag: str) -> int:
    """Epoch milliseconds, or an ISO 8601 time (`2024-05-01T12:00:00`, `...Z`, `+02:00`);
    a time without a zone is local time, as Kafka's --to-datetime reads it."""
    stripped = text.strip()
    if stripped.lstrip("-").isdigit():
        return int(stripped)
    try:
        parsed = dt.datetime.fromisoformat(stripped.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"{flag}: expected epoch milliseconds or an ISO 8601 time "
                         f"(2024-05-01T12:00:00.000), got {text!r}") from None
    if parsed.tzinfo is None:
        parsed = parsed.astimezone()
    return (parsed - _EPOCH) // dt.timedelta(milliseconds=1)


def format_ms(timestamp: int | None) -> str | None:
    """ISO 8601 in UTC with milliseconds, or None for Kafka's 'no timestamp' (-1)."""
    if timestamp is None or timestamp < 0:
        return None
    moment = dt.datetime.fromtimestamp(timestamp / 1000, tz=dt.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def human_bytes(size: int | None) -> str | None:
    if size is None or size < 0:
        return None
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"
