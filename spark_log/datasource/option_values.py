"""Reading one option's value: names are case-insensitive (Spark lower-cases them), and a value
that does not parse fails on the driver with a message naming the option and what it takes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from .errors import PylogOptionError


def get_option(options: Mapping[str, str], name: str) -> str | None:
    """The option's value as a string (option names are case-insensitive), None if not given."""
    value = options.get(name.lower())
    return None if value is None else str(value)


def parse_bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    value = get_option(options, name)
    if value is None:
        return default
    word = value.strip().lower()
    if word in ("true", "false"):
        return word == "true"
    raise PylogOptionError(f"Option '{name}' must be 'true' or 'false', got {value!r}")


def parse_positive_int(options: Mapping[str, str], name: str,
                       minimum: int = 1) -> int | None:
    value = get_option(options, name)
    if value is None:
        return None
    try:
        number = int(value.strip())
    except ValueError:
        raise PylogOptionError(
            f"Option '{name}' must be a whole number, got {value!r}") from None
    if number < minimum:
        raise PylogOptionError(f"Option '{name}' must be >= {minimum}, got {number}")
    return number


_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|min|h|d)?\s*$", re.IGNORECASE)
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_duration_ms(options: Mapping[str, str], name: str, default: int) -> int:
    """'15m', '30s', '500ms' or plain milliseconds (Spark's maxTriggerDelay syntax)."""
    value = get_option(options, name)
    if value is None:
        return default
    match = _DURATION.match(value)
    if not match:
        raise PylogOptionError(
            f"Option '{name}' must be a duration such as '15m', '30s' or '500ms', got {value!r}")
    return int(match.group(1)) * _UNIT_MS[(match.group(2) or "ms").lower()]
