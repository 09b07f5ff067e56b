"""Turning input lines into records, as kafka-console-producer's line reader does.

Properties (Kafka's names and defaults): `parse.key` (false) with `key.separator` (tab);
`parse.headers` (false) with `headers.delimiter` (tab, between the headers and the rest),
`headers.separator` (",") and `headers.key.separator` (":"); `null.marker` (unset: a key,
value, header key or header value equal to it becomes null); `ignore.error` (false: a line
without a separator is an error; true: the whole line is the value). A line is
`[headers<delimiter>][key<separator>]value`. Lines come as text decoded with surrogateescape
(`INPUT_ERRORS`), so bytes that are not UTF-8 reach keys and values unchanged; only header keys,
which Kafka types as strings, must be UTF-8.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .arguments import flag_bool, separator
from .errors import UsageError

Header = tuple[str, bytes | None]
INPUT_ERRORS = "surrogateescape"  # how input lines are decoded, and encoded back to bytes
KNOWN = frozenset({"parse.key", "key.separator", "parse.headers", "headers.delimiter",
                   "headers.separator", "headers.key.separator", "null.marker", "ignore.error"})


@dataclass(frozen=True)
class LineRecord:
    key: bytes | None
    value: bytes | None
    headers: list[Header] = field(default_factory=list)


class LineReader:
    def __init__(self, props: dict[str, str]) -> None:
        unknown = sorted(set(props) - KNOWN)
        if unknown:
            raise UsageError(f"--property {unknown[0]}: unknown; the line reader knows "
                             f"{', '.join(sorted(KNOWN))}")
        self.parse_key = flag_bool(props, "parse.key")
        self.key_separator = separator(props, "key.separator", "\t")
        self.parse_headers = flag_bool(props, "parse.headers")
        self.headers_delimiter = separator(props, "headers.delimiter", "\t")
        self.headers_separator = separator(props, "headers.separator", ",")
        self.header_key_separator = separator(props, "headers.key.separator", ":")
        self.null_marker = props.get("null.marker")
        self.ignore_error = flag_bool(props, "ignore.error")
        for name in ("key.separator", "headers.delimiter", "headers.separator",
                     "headers.key.separator"):
            if name in props and not props[name]:
                raise UsageError(f"--property {name}: must not be empty")

    def read(self, line: str, number: int) -> LineRecord:
        """The record of input line `number` (1-based, for error messages)."""
        rest, headers = line, []
        if self.parse_headers:
            part, rest = self._split(rest, self.headers_delimiter, "headers delimiter", number)
            headers = self._headers(part, number) if part is not None else []
        key = None
        if self.parse_key:
            key_text, rest = self._split(rest, self.key_separator, "key separator", number)
            key = self._bytes(key_text)
        return LineRecord(key, self._bytes(rest), headers)

    def _split(self, text: str, sep: str, what: str, number: int) -> tuple[str | None, str]:
        head, found, tail = text.partition(sep)
        if found:
            return head, tail
        if self.ignore_error:
            return None, text
        raise UsageError(f"no {what} {sep!r} on line {number}: {text!r}")

    def _headers(self, text: str, number: int) -> list[Header]:
        headers: list[Header] = []
        for pair in text.split(self.headers_separator):
            name, found, value = pair.partition(self.header_key_separator)
            if not found and not self.ignore_error:
                raise UsageError(f"no header key separator {self.header_key_separator!r} in "
                                 f"{pair!r} on line {number}")
            if name == self.null_marker:
                raise UsageError(f"header key {name!r} on line {number} is the null marker; "
                                 "header keys cannot be null")
            if _has_undecodable(name):
                raise UsageError(f"header key on line {number} is not UTF-8: "
                                 f"{name.encode('utf-8', INPUT_ERRORS)!r}")
            headers.append((name, self._bytes(value) if found else None))
        return headers

    def _bytes(self, text: str | None) -> bytes | None:
        if text is None or (self.null_marker is not None and text == self.null_marker):
            return None
        return text.encode("utf-8", INPUT_ERRORS)


def _has_undecodable(text: str) -> bool:
    """True if `text` holds bytes that were not UTF-8 (surrogateescape's lone surrogates)."""
    return any("\udc80" <= ch <= "\udcff" for ch in text)
