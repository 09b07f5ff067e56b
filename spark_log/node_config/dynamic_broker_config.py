"""The broker settings that exist only as dynamic configs, set at runtime through
IncrementalAlterConfigs or AlterConfigs on a BROKER resource and kept in the cluster metadata
(Kafka's DynamicConfig.Broker, from QuotaConfig): the replication throttle rates a
reassignment sets (`kafka-reassign-partitions.sh --throttle`) and the log-directory move rate.

A broker resource names one broker (its id) or every broker (""); a broker's own value wins
over the cluster default, which wins over the definition's default (no throttle). They are not
node settings: a node never starts with them, so `definitions` does not list them.
"""

from __future__ import annotations

from .definitions import MAX_LONG, ConfigDef

__all__ = ["DYNAMIC_BROKER_CONFIGS", "invalid_value"]

_RATE_DOC = ("Upper bound, in bytes per second, of the replication traffic of the replicas "
             "listed in the topic config {}.")

DYNAMIC_BROKER_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in (
    ConfigDef("leader.replication.throttled.rate", "long", MAX_LONG,
              _RATE_DOC.format("leader.replication.throttled.replicas"), 0),
    ConfigDef("follower.replication.throttled.rate", "long", MAX_LONG,
              _RATE_DOC.format("follower.replication.throttled.replicas"), 0),
    ConfigDef("replica.alter.log.dirs.io.max.bytes.per.second", "long", MAX_LONG,
              "Upper bound, in bytes per second, of the disk traffic of replicas moving "
              "between log directories.", 0),
)}


def invalid_value(name: str, value: str | None) -> str | None:
    """Why `value` is not valid for the dynamic broker config `name` (None: it is, or it
    deletes the config); `name` must be one of DYNAMIC_BROKER_CONFIGS."""
    if value is None:
        return None
    definition = DYNAMIC_BROKER_CONFIGS[name]
    try:
        number = int(value.strip())
    except ValueError:
        return f"Invalid value {value} for configuration {name}: Not a number of type LONG"
    if definition.at_least is not None and number < definition.at_least:
        return (f"Invalid value {value} for configuration {name}: Value must be at least "
                f"{definition.at_least}")
    if number > MAX_LONG:
        return f"Invalid value {value} for configuration {name}: Not a number of type LONG"
    return None
