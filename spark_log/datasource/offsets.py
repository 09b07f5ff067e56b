"""Offset specifications under Spark's Kafka option syntax, and Spark's offset JSON.

A partition is a `(topic, partition)` tuple (`TopicPartition` below). Spark writes offsets as
JSON of topics to partitions to offsets, `{"topicA":{"0":23,"1":-1}}`, where -2 means earliest
and -1 latest; timestamps use the same shape with milliseconds since the epoch. This module only
parses and prints those values: turning a spec into concrete offsets needs a broker and lives in
`resolve`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from .errors import PylogOptionError

TopicPartition = tuple[str, int]
Offsets = dict[TopicPartition, int]

EARLIEST = -2
LATEST = -1


@dataclass(frozen=True)
class EarliestSpec:
    """Start (or end) at each partition's log start offset."""


@dataclass(frozen=True)
class LatestSpec:
    """Start (or end) at each partition's end: the high watermark, or the last stable offset
    under read_committed."""


@dataclass(frozen=True)
class OffsetsSpec:
    """Offsets per partition; -2/-1 stand for earliest/latest. Partitions not listed take
    `default` (Spark: earliest for new partitions, an error for missing ones in batch)."""

    offsets: Mapping[TopicPartition, int] = field(default_factory=dict)


@dataclass(frozen=True)
class TimestampSpec:
    """The first offset whose timestamp is >= `timestamp` (ms), in every partition."""

    timestamp: int


@dataclass(frozen=True)
class TimestampsSpec:
    """The first offset whose timestamp is >= the given one (ms), per partition."""

    timestamps: Mapping[TopicPartition, int] = field(default_factory=dict)


@dataclass(frozen=True)
class GroupSpec:
    """The offsets last committed by the query's consumer group (pylog: startingOffsets=group);
    partitions without a committed offset start at earliest."""


OffsetSpecT = EarliestSpec | LatestSpec | OffsetsSpec | TimestampSpec | TimestampsSpec | GroupSpec


def parse_partition_json(text: str, option: str) -> dict[TopicPartition, int]:
    """`{"t":{"0":23}}` -> {("t", 0): 23}; a clear PylogOptionError naming `option` otherwise."""
    try:
        value = json.loads(text)
    except ValueError as e:
        raise PylogOptionError(
            f"Option '{option}' is not valid JSON ({e.msg} at character {e.pos}): expected "
            f'topics to partitions to numbers, e.g. {{"topicA":{{"0":23,"1":-1}}}}, got {text!r}'
        ) from None
    if not isinstance(value, dict) or not value:
        raise PylogOptionError(
            f"Option '{option}' must be a JSON object of topics to partitions to numbers, "
            f'e.g. {{"topicA":{{"0":23,"1":-1}}}}, got {text!r}'
        )
    result: dict[TopicPartition, int] = {}
    for topic, partitions in value.items():
        if not isinstance(partitions, dict):
            raise PylogOptionError(
                f"Option '{option}': topic {topic!r} must map to an object of partition numbers "
                f"to numbers, got {json.dumps(partitions)}"
            )
        for part, number in partitions.items():
            result[(topic, _partition_number(part, topic, option))] = _number(
                number, topic, part, option)
    return result


def _partition_number(text: str, topic: str, option: str) -> int:
    try:
        number = int(text)
    except ValueError:
        number = -1
    if number < 0 or str(number) != text.strip():
        raise PylogOptionError(
            f"Option '{option}': topic {topic!r} has partition key {text!r}, expected a "
            "partition number such as \"0\""
        )
    return number


def _number(value: object, topic: str, part: str, option: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise PylogOptionError(
            f"Option '{option}': {topic!r} partition {part} must be a whole number, got "
            f"{json.dumps(value)}"
        )
    return value


def parse_offsets_option(text: str, option: str, *, batch_end: bool = False) -> OffsetSpecT:
    """startingOffsets / endingOffsets: earliest, latest, group, or offset JSON."""
    word = text.strip().lower()
    if word == "earliest":
        return EarliestSpec()
    if word == "latest":
        return LatestSpec()
    if word == "group" and not batch_end:
        return GroupSpec()
    if text.strip().startswith("{"):
        offsets = parse_partition_json(text, option)
        for (topic, part), number in offsets.items():
            if number < EARLIEST:
                raise PylogOptionError(
                    f"Option '{option}': {topic!r} partition {part} has offset {number}; "
                    "offsets are >= 0, or -2 (earliest) or -1 (latest)"
                )
        return OffsetsSpec(offsets)
    allowed = "'earliest', 'latest', or a JSON string" if batch_end else (
        "'earliest', 'latest', 'group', or a JSON string")
    raise PylogOptionError(
        f"Option '{option}' must be {allowed} such as "
        f'{{"topicA":{{"0":23,"1":-1}}}} (-2 = earliest, -1 = latest), got {text!r}'
    )


def parse_timestamp_option(text: str, option: str) -> TimestampSpec:
    try:
        value = int(text.strip())
    except ValueError:
        raise PylogOptionError(
            f"Option '{option}' must be a timestamp in milliseconds since the epoch, got {text!r}"
        ) from None
    if value < 0:
        raise PylogOptionError(f"Option '{option}' must be >= 0, got {value}")
    return TimestampSpec(value)


def parse_timestamps_option(text: str, option: str) -> TimestampsSpec:
    stamps = parse_partition_json(text, option)
    for (topic, part), value in stamps.items():
        if value < 0:
            raise PylogOptionError(
                f"Option '{option}': {topic!r} partition {part} has timestamp {value}; "
                "timestamps are milliseconds since the epoch (>= 0)"
            )
    return TimestampsSpec(stamps)


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """{("t", 0): 23} -> {"t": {"0": 23}}: Spark's offset shape, topics and partitions sorted."""
    result: dict[str, dict[str, int]] = {}
    for (topic, part) in sorted(offsets):
        result.setdefault(topic, {})[str(part)] = int(offsets[(topic, part)])
    return result


def offsets_from_json(value: Mapping[str, Mapping[str, int]] | str) -> Offsets:
    """The inverse of `offsets_to_json`; accepts the dict or its JSON text."""
    if isinstance(value, str):
        value = json.loads(value)
    return {(topic, int(part)): int(off) for topic, parts in value.items()
            for part, off in parts.items()}
