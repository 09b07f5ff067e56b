"""spark_log.node_config: a node's settings under Kafka's names (Kafka's KafkaConfig), shared by
everything that reads them: the broker, the controller and `spark-log storage`.

    definitions.py     every setting: name, type, default, what values it takes
    dynamic_broker_config.py  the broker settings that are only dynamic (replication throttles)
    endpoints.py       `listeners`, `advertised.listeners`, `listener.security.protocol.map`
    voters.py          `controller.quorum.voters` (`id@host:port,...`)
    node.py            what the node is: id, roles, voters, listeners with their advertised address
    node_checks.py     the checks of roles, voters and listeners Kafka makes at start
    broker_config.py   `BrokerConfig`: the validated settings and typed accessors
    launch_flags.py    the command-line shorthands (`--data-dir`, `--host/--port`, ...)

Pure: no sockets and no files but the `--config-file` a command names. May import raft/ (its
`QuorumConfig`), `spark_log.properties` and the standard library; never the broker, the
controller, storage or the CLI.
"""
