"""spark_log.broker: a Kafka-wire-protocol broker (`python -m spark_log.broker`).

    broker.py        the assembly: builds every part below, starts and stops them as a unit
    server/          listener, connections, dispatcher, request context, one handler module per
                     API family; handlers reach the parts through `server.services`
    metrics/         Prometheus counters, scrape-time state gauges, the /metrics endpoint
    topics/          creating, deleting, growing and configuring topics
    transaction/     the transaction coordinator, its `__transaction_state` and producer ids
    group/           the group coordinator, its `__consumer_offsets` and rebalance protocol
    coordinator/     what both coordinators share: loading their partitions, their protocols
    replication/     the partitions this broker leads, leader epochs, waiting for appends
    errors.py, broker_config.py   Kafka error codes of exceptions; the broker's settings

What may import what is the layers contract in pyproject.toml, top to bottom as listed: only
`broker.py` builds the concrete coordinators and managers, which take the narrow collaborators
they use (small protocols of the package that uses them), never the Broker. The broker may
import storage/, protocol/, records/ and the small top-level helpers; never the data source,
the clients or the CLI.
"""
