"""The jobs' command lines: one parser style (the module docstring as description, examples
kept as written, defaults shown where there is one) and the values that need parsing, such as
points in time: epoch milliseconds or ISO 8601 (`2024-05-01`, `2024-05-01T12:00:00Z`,
`...+02:00`), where a time without a zone is local time, as in Kafka's tools and `spark-log`.
"""

from __future__ import annotations

import argparse
import datetime as dt

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the description's line breaks; appends `(default: X)` when X means something."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if ("%(default)" in text or default in (None, False, argparse.SUPPRESS)
                or not action.option_strings or "default" in text):
            return text
        return f"{text} (default: %(default)s)"


def new_parser(prog: str, doc: str | None) -> argparse.ArgumentParser:
    """A parser whose description is the job's module docstring."""
    return argparse.ArgumentParser(prog=prog, description=doc,
                                   formatter_class=_HelpFormatter)


def epoch_ms(text: str) -> int:
    """An argparse type: a point in time as epoch milliseconds."""
    stripped = text.strip()
    if stripped.lstrip("-").isdigit():
        return int(stripped)
    try:
        parsed = dt.datetime.fromisoformat(stripped.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected epoch milliseconds or an ISO 8601 time (2024-05-01T12:00:00Z), "
            f"got {text!r}") from None
    if parsed.tzinfo is None:
        parsed = parsed.astimezone()
    return (parsed - _EPOCH) // dt.timedelta(milliseconds=1)


def key_values(items: list[str], flag: str) -> dict[str, str]:
    """`["a=1", "b=2"]` -> {"a": "1", "b": "2"}; exits with a usage error naming `flag`."""
    pairs: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"{flag} expects KEY=VALUE, got {item!r}")
        pairs[key.strip()] = value
    return pairs
