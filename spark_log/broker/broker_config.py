"""The broker's settings: a node's settings under Kafka's names, defined and checked in
`spark_log.node_config` (shared with the controller and `spark-log storage`), under the names
the broker's modules import them by; and the broker settings that are only dynamic (the
replication throttles), kept in the cluster metadata.
"""

from spark_log.node_config.broker_config import BrokerConfig
from spark_log.node_config.definitions import DEFINITIONS, ConfigDef
from spark_log.node_config.dynamic_broker_config import DYNAMIC_BROKER_CONFIGS, invalid_value

__all__ = ["DEFINITIONS", "DYNAMIC_BROKER_CONFIGS", "BrokerConfig", "ConfigDef",
           "invalid_value"]
