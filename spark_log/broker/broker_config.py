"""The broker's settings: a node's settings under Kafka's names, defined and checked in
`spark_log.node_config` (shared with the controller and `spark-log storage`), under the names
the broker's modules import them by.
"""

from spark_log.node_config.broker_config import BrokerConfig
from spark_log.node_config.definitions import DEFINITIONS, ConfigDef

__all__ = ["DEFINITIONS", "BrokerConfig", "ConfigDef"]
